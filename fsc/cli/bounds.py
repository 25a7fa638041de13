"""Bounds of the values `fsc profile`, `fsc eval` and `fsc estimate` take, and the parsers of
their lists and sizes (every option of a size, S, B, a length, takes 4096, 4k or 1m): far beyond any real decoding point or device, small enough that a typo
(`--B 1e9`, `--memory 1e-30`) is refused rather than computed with. G's bound is
fsc.blocks.MAX_G (the recipe schema's)."""

from __future__ import annotations

import math
import re
from typing import Annotated

import typer

from fsc.errors import UsageError

MAX_S = 2**24  # tokens of context (16M)
MAX_B = 4096  # sequences decoded together
MAX_WORKERS = 1024  # worker processes or groups of a sweep

# Device figures, (low, high). Below these the floor time divides by next to nothing.
TB_S = (1e-3, 1e3)  # memory bandwidth, TB/s
TFLOPS = (1e-3, 1e6)  # dense matrix peak, TFLOP/s
GB = (1e-3, 1e6)  # device memory, GB
MIN_BUDGET = 2**20  # a --memory-budget below 1 MiB holds no model
MAX_BUDGET = 2**60

_SUFFIX = {"k": 2**10, "m": 2**20}
_UNITS = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50, "eib": 2**60,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15, "eb": 10**18,
          "b": 1}  # (the longest suffix first: `parse_bytes` takes the first that ends a size)


def between(low: int, high: int):
    """A typer callback: the option's integer must lie in [low, high]. (Typer's own min/max
    messages do not always name the value given.)"""

    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value} must be between {low} and {high}")
        return value

    return check


def size(low: int, high: int, option: str):
    """A typer callback for a str option that holds one size: '4096', '4k' or '1m' (as
    parse_sizes reads them), in [low, high]; the command gets the int."""

    def check(value: str | int | None) -> int | None:
        if value is None or isinstance(value, int):
            return value
        if "," in value:
            raise typer.BadParameter(f"{value[:40]!r}: one size, e.g. 4096 or 4k")
        try:
            (n,) = parse_sizes(value, option, low, high, one=True)
        except UsageError as e:
            raise typer.BadParameter(str(e).removeprefix(f"{option}: ")) from None
        return n

    return check


def listed(option: str, help: str):
    """The type of a comma-list option that may be given several times (click keeps only the
    last value of an option that does not repeat): the command gets each value given, or
    None, and reads them as one list (`joined`): `--lengths 1k --lengths 2k` is
    `--lengths 1k,2k`, as `fsc profile --S` reads them."""
    return Annotated[list[str] | None, typer.Option(
        option, metavar="LIST", show_default=False, help=f"{help} Repeatable: the lists join.")]


def joined(*options: list[str] | None) -> tuple[str | None, ...]:
    """Each `listed` option's values as one comma list (None: not given)."""
    return tuple(None if values is None else ",".join(values) for values in options)


def one_value(option: str, default, several: str, check=None):
    """A typer callback for an option that holds one value but is declared repeatable (a
    list), so that a second value is refused rather than dropped unsaid (click keeps the
    last). The command gets a list of one item: the value (through `check`, another callback,
    where given), or `default` when the option is not given. `several` says where more than
    one value is taken."""

    def one(values: list | None) -> list:
        if not values:
            return [default]
        if len(values) > 1:
            raise typer.BadParameter(f"given {len(values)} times "
                                     f"({', '.join(repr(str(v)) for v in values)}); {several}")
        return [values[0] if check is None else check(values[0])]

    return one


def point(kind: type, option: str, default: int | None, help: str, several: str, check=None):
    """The type of an option of one point (`fsc estimate --S`, `fsc build --B`): one value,
    a second refused (`one_value`; the command unpacks its list of one)."""
    return Annotated[list[kind] | None, typer.Option(
        option, callback=one_value(option, default, several, check),
        metavar="N", show_default=False, help=help)]


def parse_sizes(text: str, option: str, low: int, high: int, one: bool = False) -> list[int]:
    """'1024,4096' or '1k,256k' -> [1024, 4096] (k = 1024, m = 2**20), each in [low, high] and
    given once;
    `one`: an option that takes one size (its errors' examples are of one)."""
    # an example in the option's own range: lengths, or small counts (a batch, G, K, pairs)
    example = "1024,4096 or 4k" if high > MAX_B else "1,2,4"
    if one:
        example = "4096 or 4k" if high > MAX_B else "4"
    if not text.strip():
        raise UsageError(f"{option} is empty; give {'a size' if one else 'sizes'} such as "
                         f"{example}")
    values = []
    for part in text.split(","):
        p = part.strip().lower()
        mult = _SUFFIX.get(p[-1:], 1)
        digits = p[:-1] if mult > 1 else p
        if not p:
            raise UsageError(f"{option}: {text.strip()[:40]!r} has an empty entry; give "
                             f"sizes such as {example}")
        if re.fullmatch(r"-[0-9]{1,12}", digits):
            raise UsageError(f"{option}: {part.strip()} is below {low}")
        if re.fullmatch(r"[0-9]{13,}", digits):  # a whole number, past any fsc takes
            raise UsageError(f"{option}: {part.strip()[:40]} is above {high}, the largest fsc "
                             "takes")
        if not re.fullmatch(r"[0-9]{1,12}", digits):
            raise UsageError(f"{option}: {part.strip()[:40]!r} is not an integer "
                             f"(e.g. {example})")
        v = int(digits) * mult
        if v < low:
            raise UsageError(f"{option}: {v} is below {low}")
        if v > high:
            raise UsageError(f"{option}: {v} is above {high}, the largest fsc takes")
        if v in values:  # (1k,1024 among them) it would be measured twice
            raise UsageError(f"{option}: {v} is given twice")
        values.append(v)
    return values


def parse_bytes(text: str, option: str = "--memory-budget") -> int:
    """'2GiB', '512MiB', '1.5GB', '1EiB' or '1000000' (bytes) -> bytes, between 1 MiB and 1 EiB
    (binary units KiB to EiB, decimal kB to EB)."""
    t = text.strip().lower()
    unit = next((u for u in _UNITS if t.endswith(u)), "")
    try:
        value = float(t[: len(t) - len(unit)]) * _UNITS.get(unit, 1)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"{option}: {text[:40]!r} is not a size (e.g. 2GiB, 512MiB or 1000000 "
                         "bytes)")
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise UsageError(f"{option}: {text[:40]!r} must be between 1MiB and 1EiB (a budget holds "
                         "a model's weights, cache and activations)")
    return int(value)


def parse_depths(text: str) -> list[float]:
    """--depths '0,0.5,1' -> [0.0, 0.5, 1.0]: where needles sit, each in [0, 1]."""
    values = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            raise UsageError(f"--depths: {part.strip()[:40]!r} is not a number in [0, 1]") from None
        if not 0 <= v <= 1:
            raise UsageError(f"--depths: {v} is not in [0, 1] (0 = start, 1 = end)")
        values.append(v)
    return values


def parse_floats(text: str, option: str, low: float, high: float, low_open: bool = False,
                 none: bool = False) -> list[float | None]:
    """'0.5,1' -> [0.5, 1.0], each in [low, high] ((low, high] with `low_open`); with `none`,
    the word none stands for no value (e.g. no threshold)."""
    values: list[float | None] = []
    for part in text.split(","):
        p = part.strip()
        if none and p.lower() == "none":
            values.append(None)
            continue
        try:
            v = float(p)
        except ValueError:
            v = math.nan
        inside = (low < v if low_open else low <= v) and v <= high
        if not inside:
            span = f"({low:g}, {high:g}]" if low_open else f"[{low:g}, {high:g}]"
            raise UsageError(f"{option}: {p[:40]!r} is not a number in {span}"
                             + (" or none" if none else ""))
        values.append(v)
    return values
