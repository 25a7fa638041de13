"""The plotting machinery every figure of `fsc plot` and `fsc report` shares: a colour per
recipe, tick and label text, titles wrapped to the figure's width, the Agg-backed Figure itself,
rows grouped into lines, log axes that read plainly, the legend beside the axes, and the output
(PNG, SVG or PDF bytes, with no date in them). No figure touches pyplot's global state, so
building them is safe in any process, with no display.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path, PurePath
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from fsc.errors import UsageError

# Colours far apart (matplotlib's tab10). A recipe's colour comes from a hash of its name, so
# it is the same in every figure; names whose hash collides in one figure take the next free one.
# Grey, kept for reference lines (device memory, roofs), is left out.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
STYLES = ("-", "--", "-.", ":")
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
DPI = 150

Rows = list[dict[str, Any]]


def colours(names: Iterable[str]) -> dict[str, str]:
    """A colour for each name: PALETTE at the name's hash, or the next one not yet taken by a
    name before it (in sorted order); with more names than colours, colours repeat."""
    taken: dict[str, str] = {}
    for name in sorted(set(names)):
        start = int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % len(PALETTE)
        free = [PALETTE[(start + i) % len(PALETTE)] for i in range(len(PALETTE))]
        free = [c for c in free if c not in taken.values()] or free
        taken[name] = free[0]
    return taken


def tokens(x: float, _pos: Any = None) -> str:
    """1024 -> '1k', 65536 -> '64k', 1048576 -> '1M' (binary, as S is given to fsc)."""
    if x <= 0:
        return "0"
    for unit, size in (("M", 2**20), ("k", 2**10)):
        if x >= size and x % size == 0:
            return f"{int(x // size)}{unit}"
    return f"{x:g}"


def _title(what: str, rows: Rows) -> str:
    devices = sorted({str(r.get("device_name") or r.get("device") or "?") for r in rows})
    runs = sorted({r["run_id"] for r in rows})
    shown = (f"run {runs[0]}" if len(runs) == 1 else f"runs {', '.join(runs)}" if len(runs) == 2
             else f"{len(runs)} runs: {runs[0]}, …, {runs[-1]}")
    return f"{what} · {' / '.join(devices)} · {shown}"


TITLE_PT = 10
CHAR_EM = 0.62  # a title character's mean width, in ems (DejaVu Sans; digits are wider)


def wrapped(title: str, width_in: float, size_pt: float = TITLE_PT) -> str:
    """`title` broken at its " · " separators (else at spaces) into lines that fit `width_in`
    inches at `size_pt` points, so that no figure's title is clipped at its edges."""
    room = max(20, int(width_in * 72 / (size_pt * CHAR_EM)) - 2)
    lines: list[str] = []
    for part in title.split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= room:
            lines[-1] += " · " + part
            continue
        while len(part) > room:  # a part alone too long: at its last space that fits
            cut = part.rfind(" ", 0, room)
            cut = cut if cut > 0 else room
            lines.append(part[:cut])
            part = part[cut:].lstrip()
        lines.append(part)
    return "\n".join(lines)


def new_figure(what: str, rows: Rows, size: tuple[float, float] = (8.0, 4.8),
            panels: tuple[int, int] = (1, 1), **subplots: Any) -> tuple[Figure, Any]:
    fig = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(*panels, squeeze=False, **subplots)
    fig.suptitle(wrapped(_title(what, rows), size[0]), fontsize=TITLE_PT)
    return fig, axes


def varying_keys(rows: Rows, fields: tuple[str, ...]) -> list[str]:
    return [f for f in fields if len({r.get(f) for r in rows}) > 1]


def line_label(row: dict, fields: list[str]) -> str:
    """The recipe, then `field=value` of each other field that varies (a run by its id)."""
    return " · ".join([str(row["recipe"])] + [str(row[f]) if f == "run_id" else f"{f}={row[f]}"
                                              for f in fields])


def places(lines: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """For each (recipe, run id) drawn, its place among the runs of its recipe (0: the first,
    by run id): the line style or marker that tells two checkpoints of one recipe apart, where
    their colour, the recipe's, does not."""
    by_recipe: dict[str, list[str]] = defaultdict(list)
    for recipe, run_id in sorted(set(lines)):
        by_recipe[recipe].append(run_id)
    return {(recipe, run): n for recipe, runs in by_recipe.items() for n, run in enumerate(runs)}


_STEP_DIR = re.compile(r"^step-[0-9]+$")


def trained(row: dict) -> str:
    """What a row's run trained or evaluated, as the user named it: a training run's --out, an
    eval cell's checkpoint (`out/step-000020`), by its last folders; '' when unknown."""
    path = row.get("out") or row.get("checkpoint")
    if not path:
        return ""
    parts = PurePath(str(path)).parts
    return "/".join(parts[-2:] if _STEP_DIR.match(parts[-1]) and len(parts) > 1 else parts[-1:])


def run_label(row: dict, several: bool) -> str:
    """A line's name: the recipe and its run id; where the recipe is drawn from `several` runs,
    what each trained or evaluated too (two checkpoints of one recipe read apart)."""
    what = trained(row) if several else ""
    return " · ".join(v for v in (str(row["recipe"]), what, str(row["run_id"])) if v)


def grouped(rows: Rows, by: tuple[str, ...]) -> dict[tuple, Rows]:
    """Rows grouped into lines by `by` (recipe first), each line in input order."""
    groups: dict[tuple, Rows] = defaultdict(list)
    for r in rows:
        groups[tuple(r.get(f) for f in by)].append(r)
    return dict(sorted(groups.items(), key=lambda kv: tuple(_order(v) for v in kv[0])))


def _order(value) -> tuple:
    """A sort key that puts numbers in numeric order (2 before 16, which their text would not),
    then text, then missing values."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (2, 0, "") if value is None else (1, 0, str(value))


def need_rows(rows: Rows, what: str, hint: str) -> None:
    if not rows:
        raise UsageError(f"nothing to plot: no {what} in the rows selected ({hint})")


def log2_axis(axis: Any, values: Iterable[float], formatter: Callable = tokens) -> None:
    axis.set_major_locator(matplotlib.ticker.FixedLocator(sorted(set(values))))
    axis.set_major_formatter(FuncFormatter(formatter))
    axis.set_minor_formatter(NullFormatter())


NARROW_LOG = 4.0  # a log axis spanning less than this factor gets evenly spaced ticks


class _ReadableLog(LogLocator):
    """A log axis's ticks; on an axis spanning less than a factor of NARROW_LOG (where a decade
    leaves one or two labels, "2" and "3"), about five evenly spaced ones instead."""

    def tick_values(self, vmin: float, vmax: float):
        lo, hi = sorted((vmin, vmax))
        if lo > 0 and hi / lo < NARROW_LOG:
            return MaxNLocator(5).tick_values(lo, hi)
        return super().tick_values(vmin, vmax)


def plain_log(*axes: Any) -> None:
    """Log axes labelled 0.3, 2, 1000 rather than 3×10⁻¹; minor ticks (2, 3, 5 of a decade)
    labelled too when the axis spans little more than a decade, and evenly spaced ticks when
    it spans less than a factor of 4."""
    for axis in axes:
        axis.set_major_locator(_ReadableLog())
        axis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))

        def minor(v: float, _p: Any, axis: Any = axis) -> str:
            lo, hi = sorted(axis.get_view_interval())
            if v <= 0 or lo <= 0 or hi / lo > 10 ** 1.3 or hi / lo < NARROW_LOG:
                return ""
            mantissa = v / 10 ** math.floor(math.log10(v) + 1e-9)
            return f"{v:g}" if round(mantissa) in (2, 3, 5) else ""

        axis.set_minor_formatter(FuncFormatter(minor))


def put_legend(fig: Figure, handles: list, labels: list) -> None:
    if handles:
        fig.legend(handles, labels, loc="outside right center", fontsize=8, frameon=False)


# ---- output ---------------------------------------------------------------------------------

def render(fig: Figure, fmt: str, salt: str = "fsc") -> bytes:
    """The figure as PNG, SVG or PDF bytes. SVG ids are salted so that several figures can sit
    in one HTML page without their ids colliding; no dates are written, so the bytes depend on
    the data only."""
    buf = io.BytesIO()
    # no date: SVG's key is Date, PDF's CreationDate (and ModDate, unset by default)
    metadata = {"Date": None} if fmt == "svg" else {"CreationDate": None} if fmt == "pdf" else {}
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format=fmt, dpi=DPI, metadata=metadata)
    return buf.getvalue()


def save(fig: Figure, path: Path) -> None:
    """Write the figure to `path` in the format its suffix names (FORMATS)."""
    data = render(fig, FORMATS[path.suffix.lower()], salt=path.name)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)
