"""Parsers of `fsc train`'s option values: --seq-len's lengths with their weights, and
--freeze's mixer kinds."""

from __future__ import annotations

import typer

from fsc.cli.bounds import MAX_S, parse_sizes, size
from fsc.data.mix import weighted
from fsc.errors import UsageError
from fsc.text import printable


def seq_lengths(value: str | int | list | None) -> int | list | None:
    """--seq-len: one size (an int), or several with weights, LEN[:WEIGHT],... ([[L, w], ...],
    each length once)."""
    if value is None or isinstance(value, int | list):
        return value
    if "," not in value and ":" not in value:
        return size(1, MAX_S, "--seq-len")(value)
    try:
        pairs = weighted(value, "--seq-len")
        lengths = [[parse_sizes(L, "--seq-len", 1, MAX_S)[0], w] for L, w in pairs]
    except UsageError as e:
        raise typer.BadParameter(str(e).removeprefix("--seq-len: ").removeprefix(
            f"--seq-len {value}: ")) from None
    seen = [L for L, _ in lengths]
    if len(set(seen)) < len(seen):
        raise typer.BadParameter(f"{value[:60]}: a length given twice")
    longest, weight = max(lengths)
    if weight == 0:
        raise typer.BadParameter(f"{value[:60]}: the longest length, {longest}, is the run's "
                                 "training length (its in-loop eval, the checkpoint's seq_len) "
                                 "and its weight is 0; give it a weight above 0 or leave it out")
    return lengths[0][0] if len(lengths) == 1 else lengths


def mixer_kinds(value: str | None) -> list[str]:
    """--freeze: mixer kinds, comma-separated, each once (checked against the recipe later)."""
    kinds = [k.strip() for k in (value or "").split(",") if k.strip()]
    if value is not None and not kinds:
        raise UsageError("--freeze: name a mixer kind (mamba, attention, ...)")
    if len(set(kinds)) < len(kinds):
        raise UsageError(f"--freeze {printable(value, 60)}: a kind given twice")
    return kinds
