"""The figures of `fsc plot` and `fsc report`, drawn with matplotlib on its Agg canvas.

Each builder takes rows of a store view (dicts, as `fsc.results.select.rows` returns them) and
a colour per recipe, and returns a matplotlib Figure. Titles carry what is drawn, the device and
the run ids; axes carry units. No figure touches pyplot's global state, so building them is
safe in any process, with no display.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from fsc import noise
from fsc.costmodel import device_spec
from fsc.errors import UsageError
from fsc.text import byte_unit, human_bytes

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


def _figure(what: str, rows: Rows, size: tuple[float, float] = (8.0, 4.8),
            panels: tuple[int, int] = (1, 1), **subplots: Any) -> tuple[Figure, Any]:
    fig = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(*panels, squeeze=False, **subplots)
    fig.suptitle(wrapped(_title(what, rows), size[0]), fontsize=TITLE_PT)
    return fig, axes


def _varying(rows: Rows, fields: tuple[str, ...]) -> list[str]:
    return [f for f in fields if len({r.get(f) for r in rows}) > 1]


def _label(row: dict, fields: list[str]) -> str:
    return " · ".join([str(row["recipe"])] + [f"{f}={row[f]}" for f in fields])


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


def _need(rows: Rows, what: str, hint: str) -> None:
    if not rows:
        raise UsageError(f"nothing to plot: no {what} in the rows selected ({hint})")


def _log2_axis(axis: Any, values: Iterable[float], formatter: Callable = tokens) -> None:
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


def _plain_log(*axes: Any) -> None:
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


def _legend(fig: Figure, handles: list, labels: list) -> None:
    if handles:
        fig.legend(handles, labels, loc="outside right center", fontsize=8, frameon=False)


# ---- profile figures ------------------------------------------------------------------------

_LINE_KEY = ("recipe", "B", "G", "K", "dtype", "backend", "device")


def _styled(rows: Rows, colour: dict[str, str]):
    """The profile lines of `rows` (by _LINE_KEY), each with its recipe's colour, a marker
    for its B and a label naming whatever else varies: (line, colour, marker, label)."""
    varying = _varying(rows, _LINE_KEY[1:])
    b_values = sorted({r["B"] for r in rows})
    for key, line in grouped(rows, _LINE_KEY).items():
        yield (line, colour[key[0]], MARKERS[b_values.index(key[1]) % len(MARKERS)],
               _label(line[0], varying))


def latency(rows: Rows, colour: dict[str, str]) -> Figure:
    """Median step time against S (log–log) with p10–p90 bars, one line per recipe and B (and
    any other axis that varies); the cost model's floor dashed where the device is known; points
    that did not fit marked × along the top."""
    ok = [r for r in rows if r["status"] == "ok" and r["step_ms"]]
    _need(ok, "ok profile point", "fsc profile records them")
    fig, axes = _figure("latency", rows)
    ax = axes[0][0]
    extra_handles: dict[str, Line2D] = {}
    for line, c, marker, label in _styled(rows, colour):
        good = [r for r in line if r["status"] == "ok" and r["step_ms"]]
        if good:
            ax.errorbar([r["S"] for r in good], [r["step_ms"] for r in good],
                        yerr=[[r["step_ms"] - (r["step_ms_p10"] or r["step_ms"]) for r in good],
                              [(r["step_ms_p90"] or r["step_ms"]) - r["step_ms"] for r in good]],
                        color=c, marker=marker, ms=4, lw=1.4, capsize=2, label=label)
            loud = [r for r in good if noise.noisy(r)]
            if loud:  # drawn hollow, larger: a reader should not trust these
                ax.plot([r["S"] for r in loud], [r["step_ms"] for r in loud], ls="",
                        marker=marker, ms=9, mfc="white", mec=c, mew=1.4, zorder=3)
                extra_handles[f"noisy: p10–p90 > {noise.NOISY_SPREAD:.0%} of median"] = Line2D(
                    [], [], ls="", marker="o", ms=8, mfc="white", mec="0.4")
        floor = [r for r in good if r.get("floor_ms")]
        if floor:
            ax.plot([r["S"] for r in floor], [r["floor_ms"] for r in floor], ls="--", lw=1,
                    color=c, alpha=0.8)
            extra_handles["cost-model floor"] = Line2D([], [], ls="--", color="0.4", lw=1)
        oom = [r for r in line if r["status"] == "oom"]
        if oom:
            ax.scatter([r["S"] for r in oom], [0.96] * len(oom), marker="x", s=40, color=c,
                       transform=ax.get_xaxis_transform(), clip_on=False)
            extra_handles["did not fit (oom)"] = Line2D([], [], ls="", marker="x", color="0.4")
    _against_s(fig, ax, rows, "step time (ms, median; bars p10–p90)", extra_handles)
    return fig


def _against_s(fig: Figure, ax: Any, rows: Rows, ylabel: str, extra: dict[str, Line2D]) -> None:
    """Log–log axes over S with `ylabel`, and the legend: the lines, then `extra` entries."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    _log2_axis(ax.xaxis, [r["S"] for r in rows if r["S"] > 0])
    ax.set_xlabel("context length S (tokens in the cache)")
    ax.set_ylabel(ylabel)
    _plain_log(ax.yaxis)
    ax.grid(True, which="both", alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()
    _legend(fig, handles + list(extra.values()), labels + list(extra))


def memory(rows: Rows, colour: dict[str, str]) -> Figure:
    """Peak memory against S, one line per recipe and B; the device's memory as a line; points
    that did not fit marked × at the memory the cost model says they need."""
    ok = [r for r in rows if r["status"] == "ok" and r["peak_bytes"]]
    _need(ok, "ok profile point", "fsc profile records them")
    fig, axes = _figure("memory", rows)
    ax = axes[0][0]
    extra: dict[str, Line2D] = {}
    drawn = [r["peak_bytes"] for r in ok] + [r["predicted_total_bytes"] for r in rows
                                             if r["status"] == "oom"
                                             and r.get("predicted_total_bytes")]
    unit, size = byte_unit(max(drawn))
    for line, c, marker, label in _styled(rows, colour):
        good = [r for r in line if r["status"] == "ok" and r["peak_bytes"]]
        if good:
            ax.plot([r["S"] for r in good], [r["peak_bytes"] / size for r in good], color=c,
                    marker=marker, ms=4, lw=1.4, label=label)
        oom = [r for r in line if r["status"] == "oom" and r.get("predicted_total_bytes")]
        if oom:
            ax.scatter([r["S"] for r in oom], [r["predicted_total_bytes"] / size for r in oom],
                       marker="x", s=40, color=c)
            extra["did not fit (oom): predicted need"] = Line2D([], [], ls="", marker="x",
                                                                color="0.4")
    for name, total in sorted({(r.get("device_name") or r["device"], r.get("device_memory_bytes"))
                               for r in rows if r.get("device_memory_bytes")}):
        if total <= DEVICE_LINE_SPAN * max(drawn):
            ax.axhline(total / size, color="0.3", ls=":", lw=1.2)
            extra[f"{name} memory ({human_bytes(total)})"] = Line2D([], [], ls=":", color="0.3")
        else:  # a line decades above the data would squash it: named, not drawn
            extra[f"{name} memory: {human_bytes(total)}, above the axis (not drawn)"] = Line2D(
                [], [], ls="", color="0.3")
    _against_s(fig, ax, rows, f"peak memory ({unit})", extra)
    return fig


DEVICE_LINE_SPAN = 10  # the device's memory is drawn when within this factor of the data


def throughput(rows: Rows, colour: dict[str, str]) -> Figure:
    """Tokens per second against B, one panel per S, one line per recipe (and any other axis
    that varies)."""
    ok = [r for r in rows if r["status"] == "ok" and r["tokens_per_s"]]
    _need(ok, "ok profile point", "fsc profile records them")
    if len({r["B"] for r in ok}) == 1:
        return _throughput_by_s(rows, ok, colour)
    s_values = sorted({r["S"] for r in ok})
    cols = min(4, len(s_values))
    n_rows = math.ceil(len(s_values) / cols)
    fig, axes = _figure("throughput", rows, size=(2.6 * cols + 2.4, 2.6 * n_rows + 0.8),
                        panels=(n_rows, cols), sharey=True)
    key = ("recipe", "G", "K", "dtype", "backend", "device")
    varying = _varying(ok, key[1:])
    seen: dict[str, Any] = {}
    for i, S in enumerate(s_values):
        ax = axes[i // cols][i % cols]
        for k, line in grouped([r for r in ok if r["S"] == S], key).items():
            label = _label(line[0], varying)
            (h,) = ax.plot([r["B"] for r in line], [r["tokens_per_s"] for r in line], marker="o",
                           ms=4, lw=1.4, color=colour[k[0]])
            seen.setdefault(label, h)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _log2_axis(ax.xaxis, [r["B"] for r in ok], lambda x, _p=None: f"{x:g}")
        ax.set_title(f"S = {tokens(S)}", fontsize=9)
        ax.set_xlabel("batch B (sequences)")
        _plain_log(ax.yaxis)
        ax.grid(True, which="both", alpha=0.25)
    for i in range(len(s_values), n_rows * cols):
        axes[i // cols][i % cols].set_visible(False)
    for row in axes:
        row[0].set_ylabel("throughput (tokens/s)")
    _legend(fig, list(seen.values()), list(seen))
    return fig


def _throughput_by_s(rows: Rows, ok: Rows, colour: dict[str, str]) -> Figure:
    """One B measured: tokens per second against S, one line per recipe (a panel per S would
    hold one dot each)."""
    fig, axes = _figure(f"throughput at B = {ok[0]['B']}", rows)
    ax = axes[0][0]
    key = ("recipe", "G", "K", "dtype", "backend", "device")
    varying = _varying(ok, key[1:])
    for k, line in grouped(ok, key).items():
        line = sorted(line, key=lambda r: r["S"])
        ax.plot([r["S"] for r in line], [r["tokens_per_s"] for r in line], marker="o", ms=4,
                lw=1.4, color=colour[k[0]], label=_label(line[0], varying))
    _against_s(fig, ax, ok, "throughput (tokens/s)", {})
    return fig


def roofline(rows: Rows, colour: dict[str, str]) -> Figure:
    """Achieved FLOP rate and bandwidth of each step against its arithmetic intensity (the cost
    model's FLOPs and bytes of the step, over the measured time), with the device's roofs where
    fsc knows them (a CUDA part in its table, or the run's --bandwidth)."""
    ok = [r for r in rows if r["status"] == "ok" and r["step_ms"] and r.get("step_flops")
          and r.get("predicted_step_bytes")]
    _need(ok, "ok profile point with the cost model's FLOPs and bytes", "fsc profile records them")
    fig, axes = _figure("roofline", rows, size=(11.0, 4.6), panels=(1, 2))
    flops_ax, bw_ax = axes[0]
    seen: dict[str, Any] = {}
    intensity_all = []
    for line, c, marker, label in _styled(ok, colour):
        x = [r["step_flops"] / r["predicted_step_bytes"] for r in line]
        seconds = [r["step_ms"] / 1e3 for r in line]
        sizes = [12 + 4 * math.log2(max(r["S"], 1)) for r in line]  # grows with S
        intensity_all += x
        h = flops_ax.scatter(x, [r["step_flops"] / s / 1e9 for r, s in zip(line, seconds)],
                             color=c, marker=marker, s=sizes)
        bw_ax.scatter(x, [r["predicted_step_bytes"] / s / 1e9 for r, s in zip(line, seconds)],
                      color=c, marker=marker, s=sizes)
        seen.setdefault(label, h)
    lo, hi = min(intensity_all) / 2, max(intensity_all) * 2
    xs = [lo * (hi / lo) ** (i / 63) for i in range(64)]
    for roof in _roofs(rows):
        bw, peak, name = roof
        if peak:
            flops_ax.plot(xs, [min(peak, bw * x) / 1e9 for x in xs], color="0.3", lw=1.2)
            seen.setdefault(f"{name} roof", Line2D([], [], color="0.3", lw=1.2))
        bw_ax.axhline(bw / 1e9, color="0.3", ls=":", lw=1.2)
        seen.setdefault(f"{name} bandwidth ({bw / 1e12:.2f} TB/s)",
                        Line2D([], [], color="0.3", ls=":", lw=1.2))
    for ax, what in ((flops_ax, "achieved compute (GFLOP/s)"),
                     (bw_ax, "achieved bandwidth (GB/s)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP/byte, cost model)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.25)
        _plain_log(ax.xaxis, ax.yaxis)
    if not _roofs(rows):  # in the legend, beside the plot: a note on the axes hides points
        seen["no roof drawn: fsc knows a device's peaks\nonly for the CUDA parts in its table,"
             "\nor a bandwidth from fsc profile --bandwidth"] = Line2D([], [], ls="")
    flops_ax.set_title("marker size grows with S", fontsize=8)
    _legend(fig, list(seen.values()), list(seen))
    return fig


def _roofs(rows: Rows) -> list[tuple[float, float | None, str]]:
    """(bandwidth B/s, peak FLOP/s or None, name) of each device of the rows fsc knows."""
    found = {}
    for r in rows:
        name = r.get("device_name") or r["device"]
        spec = device_spec(str(name)) if r["device"].startswith("cuda") else None
        if spec is not None:
            found[spec.name] = (spec.bandwidth_bytes_per_s, spec.peak_flops, spec.name)
        elif r.get("bandwidth"):
            found[f"{name} (--bandwidth)"] = (r["bandwidth"] * 1e12, None, f"{name} (--bandwidth)")
    return list(found.values())


# ---- training and evaluation figures --------------------------------------------------------

def loss(rows: Rows, colour: dict[str, str]) -> Figure:
    """Training loss against optimizer step, one line per run, one panel per task (data and
    objective: losses of different tasks do not share an axis); the in-loop eval accuracy
    below when the runs logged it."""
    _need(rows, "training step", "fsc train records them")
    acc = [r for r in rows if r.get("eval_accuracy") is not None]

    def task(r) -> str:
        return f"{r['data']} ({r['objective']})" if r.get("data") else ""

    tasks = sorted({task(r) for r in rows})
    title = "training loss" + (f" on {tasks[0]}" if len(tasks) == 1 and tasks[0] else "")
    fig, axes = _figure(title, rows, size=(8.0 if len(tasks) == 1 else 5.0 * len(tasks) + 2,
                                           6.0 if acc else 4.4),
                        panels=(2 if acc else 1, len(tasks)), sharex="col",
                        **({"height_ratios": [3, 1]} if acc else {}))
    for col, name in enumerate(tasks):
        ax = axes[0][col]
        if len(tasks) > 1:
            ax.set_title(name, fontsize=9)
        for (run_id, recipe), line in grouped([r for r in rows if task(r) == name],
                                              ("run_id", "recipe")).items():
            ax.plot([r["step"] for r in line], [r["loss"] for r in line], lw=1.2,
                    color=colour[recipe], label=f"{recipe} · {run_id}")
            got = [r for r in line if r.get("eval_accuracy") is not None]
            if got:
                axes[1][col].plot([r["step"] for r in got], [r["eval_accuracy"] for r in got],
                                  marker="o", ms=3, lw=1, color=colour[recipe])
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.25)
        if acc:
            axes[1][col].set_ylim(-0.03, 1.03)
            axes[1][col].grid(True, alpha=0.25)
        axes[-1][col].set_xlabel("optimizer step")
    axes[0][0].set_ylabel("loss (nats per token)")
    if acc:
        axes[1][0].set_ylabel("eval exact match")
    handles, labels = [], []
    for ax in axes[0]:
        h, lab = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    _legend(fig, handles, labels)
    return fig


METRICS = {"accuracy": "exact match (fraction of items)",
           "token_accuracy": "token accuracy (fraction of scored tokens)"}


def _metric(cells: Rows, metric: str) -> float:
    """The metric over cells, weighted by their item counts."""
    n = sum(c["n"] for c in cells)
    return sum(c[metric] * c["n"] for c in cells) / n if n else float("nan")


def niah_cells(rows: Rows, metric: str = "accuracy") -> Rows:
    """The evaluation rows the niah heatmap draws."""
    return [r for r in rows if r["task"] == "niah" and r.get(metric) is not None]


def retrieval_cells(rows: Rows, metric: str = "accuracy") -> Rows:
    """The evaluation rows the retrieval figure draws."""
    return [r for r in rows if r["task"] in ("niah", "mqar") and r.get("length_ratio")
            and r.get(metric) is not None]


def niah(rows: Rows, colour: dict[str, str], metric: str = "accuracy") -> Figure:
    """Needle retrieval as a length × depth heatmap, one panel per checkpoint."""
    cells = niah_cells(rows, metric)
    _need(cells, "niah cell", "fsc eval --task niah records them")
    panels = grouped(cells, ("recipe", "run_id", "checkpoint"))
    cols = min(3, len(panels))
    n_rows = math.ceil(len(panels) / cols)
    fig, axes = _figure(f"needle in a haystack: {metric.replace('_', ' ')}", cells,
                        size=(3.6 * cols + 1.2, 3.2 * n_rows + 0.8), panels=(n_rows, cols))
    image = None
    for i, ((recipe, run_id, _ckpt), panel) in enumerate(panels.items()):
        ax = axes[i // cols][i % cols]
        lengths = sorted({c["length"] for c in panel})
        depths = sorted({c["depth"] for c in panel})
        grid = [[float("nan")] * len(lengths) for _ in depths]
        for (d, L), got in grouped(panel, ("depth", "length")).items():
            grid[depths.index(d)][lengths.index(L)] = _metric(got, metric)
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        for yi, line in enumerate(grid):
            for xi, v in enumerate(line):
                if not math.isnan(v):
                    ax.text(xi, yi, f"{v:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if v < 0.6 else "black")
        ax.set_xticks(range(len(lengths)), [tokens(L) for L in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths])
        ax.set_xlabel("prompt length (tokens)")
        ax.set_ylabel("needle depth (0 = start)")
        several = len({c["run_id"] for c in cells}) > 1  # one run: the figure's title names it
        ax.set_title(f"{recipe} · {run_id}" if several else recipe, fontsize=8,
                     color=colour[recipe])
    for i in range(len(panels), n_rows * cols):
        axes[i // cols][i % cols].set_visible(False)
    fig.colorbar(image, ax=axes, shrink=0.8, label=METRICS[metric])
    return fig


def retrieval(rows: Rows, colour: dict[str, str], metric: str = "accuracy") -> Figure:
    """Retrieval (over every depth or pair count) against length ÷ training length, one line
    per backbone (and task, when more than one is shown)."""
    cells = retrieval_cells(rows, metric)
    _need(cells, "niah or mqar cell with a training length", "fsc eval RUN_DIR (a trained checkpoint) records them")
    fig, axes = _figure(f"retrieval against length: {metric.replace('_', ' ')}", cells)
    ax = axes[0][0]
    tasks = len({c["task"] for c in cells}) > 1
    for (recipe, task, run_id), line in grouped(cells, ("recipe", "task", "run_id")).items():
        by_ratio = grouped(line, ("length_ratio",))
        x = [k[0] for k in by_ratio]
        ax.plot(x, [_metric(v, metric) for v in by_ratio.values()], lw=1.4, ms=4,
                marker="s" if task == "mqar" else "o", ls="--" if task == "mqar" else "-",
                color=colour[recipe], label=f"{recipe}{f' · {task}' if tasks else ''} · {run_id}")
    ax.set_xscale("log", base=2)
    _log2_axis(ax.xaxis, [c["length_ratio"] for c in cells], lambda x, _p=None: f"{x:g}×")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("prompt length ÷ training length")
    over = {"niah": "depths", "mqar": "pair counts"}
    ax.set_ylabel(f"{METRICS[metric]},\nmean over "
                  + " or ".join(over[t] for t in over if any(c["task"] == t for c in cells)))
    ax.grid(True, alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()
    _legend(fig, handles, labels)
    return fig


RULER_ORDER = ("niah single", "niah multikey", "niah multivalue", "niah multiquery", "vt",
               "cwe", "fwe")  # the suite's parts as `fsc eval --task ruler` scores them


def ruler_part(row: dict) -> str:
    """The suite's part a cell belongs to: its task, niah with its variant."""
    return f"niah {row.get('variant') or 'single'}" if row["task"] == "niah" else row["task"]


def ruler_cells(rows: Rows) -> Rows:
    """The evaluation rows the RULER figure draws: scored cells with a training length."""
    return [r for r in rows if r.get("score") is not None and r.get("length_ratio")]


def ruler_scores(cells: Rows) -> dict[tuple, dict[str, dict[float, float]]]:
    """{(recipe, run_id): {part: {length ratio: RULER's score over the part's cells}}}, an
    `average` part beside the others (the mean over the parts, at ratios every part has)."""
    out: dict[tuple, dict[str, dict[float, float]]] = {}
    for key, line in grouped(cells, ("recipe", "run_id")).items():
        parts = {part: {r[0]: _metric(got, "score")
                        for r, got in grouped(rows, ("length_ratio",)).items()}
                 for part, rows in _by_part(line).items()}
        shared = set.intersection(*(set(v) for v in parts.values()))
        parts["average"] = {x: sum(v[x] for v in parts.values()) / len(parts)
                            for x in sorted(shared)}
        out[key] = parts
    return out


def _by_part(rows: Rows) -> dict[str, Rows]:
    got: dict[str, Rows] = defaultdict(list)
    for r in rows:
        got[ruler_part(r)].append(r)
    return dict(got)


def ruler(rows: Rows, colour: dict[str, str]) -> Figure:
    """RULER's score against length ÷ training length: a panel per part of the suite (niah's
    variants, vt, cwe, fwe) and one of their average, a line per backbone (and run)."""
    cells = ruler_cells(rows)
    _need(cells, "scored cell with a training length",
          "fsc eval RUN_DIR --task ruler (a trained checkpoint) records them")
    scores = ruler_scores(cells)
    held = {p for parts in scores.values() for p in parts if p != "average"}
    names = [p for p in RULER_ORDER if p in held] + sorted(held - set(RULER_ORDER))
    names.append("average")
    cols = min(4, len(names))
    n_rows = math.ceil(len(names) / cols)
    fig, axes = _figure("RULER-style score against length", cells,
                        size=(3.0 * cols + 1.0, 2.6 * n_rows + 1.2), panels=(n_rows, cols),
                        sharex=True, sharey=True)
    several = len({run for _, run in scores}) > len({recipe for recipe, _ in scores})
    for i, name in enumerate(names):
        ax = axes[i // cols][i % cols]
        for (recipe, run_id), parts in scores.items():
            if parts.get(name):
                x = sorted(parts[name])
                ax.plot(x, [parts[name][v] for v in x], marker="o", ms=3, lw=1.3,
                        color=colour[recipe],
                        label=f"{recipe} · {run_id}" if several else recipe)
        ax.set_title(name, fontsize=9, weight="bold" if name == "average" else "normal")
        ax.set_xscale("log", base=2)
        _log2_axis(ax.xaxis, [c["length_ratio"] for c in cells], lambda x, _p=None: f"{x:g}×")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(True, alpha=0.25)
        if i % cols == 0:
            ax.set_ylabel("score (expected strings found)")
        if i // cols == n_rows - 1 or i + cols >= len(names):
            ax.set_xlabel("length ÷ training length")
    for i in range(len(names), n_rows * cols):
        axes[i // cols][i % cols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    _legend(fig, handles, labels)
    return fig


DRAWS: dict[str, Callable[[Rows], Rows]] = {"niah": niah_cells, "retrieval": retrieval_cells,
                                            "ruler": ruler_cells}

BUILDERS: dict[str, Callable[..., Figure]] = {
    "latency": latency, "memory": memory, "throughput": throughput, "roofline": roofline,
    "loss": loss, "niah": niah, "retrieval": retrieval, "ruler": ruler,
}


# ---- output ---------------------------------------------------------------------------------

def render(fig: Figure, fmt: str, salt: str = "fsc") -> bytes:
    """The figure as PNG, SVG or PDF bytes. SVG ids are salted so that several figures can sit
    in one HTML page without their ids colliding; no dates are written, so the bytes depend on
    the data only."""
    buf = io.BytesIO()
    metadata = {"Date": None} if fmt in ("svg", "pdf") else {}
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format=fmt, dpi=DPI, metadata=metadata)
    return buf.getvalue()


def save(fig: Figure, path: Path) -> None:
    """Write the figure to `path` in the format its suffix names (FORMATS)."""
    data = render(fig, FORMATS[path.suffix.lower()], salt=path.name)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)
