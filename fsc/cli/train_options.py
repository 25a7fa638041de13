"""Parsers of `fsc train`'s option values (--seq-len's lengths with their weights, --freeze's
mixer kinds) and the option names a resumed run reads from its stored config."""

from __future__ import annotations

import typer

from fsc.cli.bounds import MAX_S, one_value, parse_sizes, size
from fsc.cli.eval_options import TRAIN_KNOBS
from fsc.data.mix import weighted
from fsc.errors import UsageError
from fsc.text import printable

# What a resumed run keeps from its stored config (giving one of these, or RECIPE, with --resume
# is an error, not silently ignored; --out too: the run goes on in its own directory);
# --train-steps may extend it, --stop-after and RESUME_CHANGES may change it, --device says where.
RUN_SETTINGS = ("G", "data", "seq_len", "out_dir", "objective", "weighting", "batch", "accum", "lr",
                "warmup", "weight_decay", "grad_clip", "seed", "dtype", "needle_digits",
                "supervise_needle", "pairs", "text_field", "tokenizer", "state_passing",
                "logit_shift", "anneal", "freeze", *TRAIN_KNOBS)
# Options of the data that only some data reads (given for other data, refused: check_read).
DATA_OPTIONS = ("needle_digits", "supervise_needle", "pairs", "text_field")
RESUME_CHANGES = ("save_every", "save_minutes", "keep", "eval_every", "log_every", "stop_at",
                  "train_backend")


def seq_lengths(values: list[str] | None) -> list:
    """--seq-len, given once or more (the lists join: `--seq-len 128 --seq-len 256` is
    `--seq-len 128,256`): one size, or several with weights, LEN[:WEIGHT],..., as
    [[L, weight], ...], each length once (a list: typer hands a repeatable option's value on
    as one)."""
    if not values:  # not given: typer makes an empty list None (0.18 fails on a None)
        return []
    value = ",".join(values)
    if "," not in value and ":" not in value:
        return [[size(1, MAX_S, "--seq-len")(value), 1.0]]
    try:
        pairs = weighted(value, "--seq-len")
        lengths = [[parse_sizes(L, "--seq-len", 1, MAX_S)[0], w] for L, w in pairs]
    except UsageError as e:
        raise typer.BadParameter(str(e).removeprefix("--seq-len: ").removeprefix(
            f"--seq-len {value}: ")) from None
    seen = [L for L, _ in lengths]
    if len(set(seen)) < len(seen):
        twice = next(L for L in seen if seen.count(L) > 1)
        raise typer.BadParameter(f"a length given twice ({twice}); give it once, with the "
                                 "weight of both")
    longest, weight = max(lengths)
    if weight == 0:
        raise typer.BadParameter(f"the longest length, {longest}, is the run's training length "
                                 "(its in-loop eval, the checkpoint's seq_len) and its weight "
                                 "is 0; give it a weight above 0 or leave it out")
    return lengths


# --data: one source, a second refused (click would keep the last, training on one of the two
# without a word): a mix of tasks is one comma list. Not given: [None].
one_source = one_value("--data", None, "a mix of tasks is one list, e.g. --data passkey:2,vt:1")


def mixer_kinds(values: list[str] | None) -> list[str]:
    """--freeze, given once or more (the lists join): mixer kinds, comma-separated, each once
    (checked against the recipe later)."""
    value = None if values is None else ",".join(values)
    kinds = [k.strip() for k in (value or "").split(",") if k.strip()]
    if value is not None and not kinds:
        raise UsageError("--freeze: name a mixer kind (mamba, attention, ...)")
    if len(set(kinds)) < len(kinds):
        raise UsageError(f"--freeze {printable(value, 60)}: a kind given twice")
    return kinds
