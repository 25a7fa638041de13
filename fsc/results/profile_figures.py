"""The profile figures (`fsc plot latency`, `memory`, `throughput`, `roofline`): rows of
the profile view, one line per recipe and B (and any other axis that varies), against S or B;
the cost model's floor, the device's memory and its roofs drawn where fsc knows them.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fsc import noise
from fsc.costmodel import device_spec
from fsc.results.axes import (
    MARKERS,
    Rows,
    grouped,
    line_label,
    log2_axis,
    need_rows,
    new_figure,
    plain_log,
    put_legend,
    tokens,
    varying_keys,
)
from fsc.text import byte_unit, human_bytes

# run_id last: two runs of one recipe drawn together are two lines, never one zigzag
_LINE_KEY = ("recipe", "B", "G", "K", "dtype", "backend", "device", "run_id")
DEVICE_LINE_SPAN = 10  # the device's memory is drawn when within this factor of the data


# a line's style among the lines of one recipe (and B) that differ in another axis (G, K, the
# run...); dashed is the cost model's floor. With it, its markers' fill (hollow is a noisy
# point's): a line of one S has no style to show, and lines past the fourth repeat one
LINE_STYLES = ("-", ":", "-.", (0, (5, 1, 1, 1, 1, 1)))
FILLS = ("full", "left", "bottom", "right")


def _variants(keys, same: int) -> dict[tuple, int]:
    """Each line key's place among the keys that share its first `same` fields: lines of one
    colour (and marker) told apart by the style and fill of that place (`_look`)."""
    count: dict[tuple, int] = {}
    place = {}
    for k in keys:
        place[k] = count.get(k[:same], 0)
        count[k[:same]] = place[k] + 1
    return place


def _look(place: int) -> tuple:
    """(line style, marker fill) of the line at `place` among those of one colour and marker:
    a pair of its own for each of the first 16."""
    return LINE_STYLES[place % len(LINE_STYLES)], FILLS[(place + place // len(FILLS)) % len(FILLS)]


def _styled(rows: Rows, colour: dict[str, str]):
    """The profile lines of `rows` (by _LINE_KEY), each with its recipe's colour, a marker
    for its B, a line style and marker fill for whatever else sets apart lines of one recipe and
    B, and a label naming whatever else varies: (line, colour, marker, (style, fill), label)."""
    varying = varying_keys(rows, _LINE_KEY[1:])
    b_values = sorted({r["B"] for r in rows})
    lines = grouped(rows, _LINE_KEY)
    place = _variants(lines, 2)
    for key, line in lines.items():
        yield (line, colour[key[0]], MARKERS[b_values.index(key[1]) % len(MARKERS)],
               _look(place[key]), line_label(line[0], varying))


def _none_ok(rows: Rows) -> str:
    """Why a figure of profile points has none to draw: the points selected, by status (every
    one out of memory, say), or that there are none (fsc profile records them)."""
    if not rows:
        return "fsc profile records them"
    said = Counter(r["status"] for r in rows)
    return "those selected are " + ", ".join(f"{n} {status}" for status, n in sorted(said.items()))


def latency(rows: Rows, colour: dict[str, str]) -> Figure:
    """Median step time against S (log–log) with p10–p90 bars, one line per recipe and B (and
    any other axis that varies); the cost model's floor dashed where the device is known; points
    that did not fit marked × along the top."""
    ok = [r for r in rows if r["status"] == "ok" and r["step_ms"]]
    need_rows(ok, "ok profile point", _none_ok(rows))
    fig, axes = new_figure("latency", rows)
    ax = axes[0][0]
    extra_handles: dict[str, Line2D] = {}
    for line, c, marker, (ls, fill), label in _styled(rows, colour):
        good = [r for r in line if r["status"] == "ok" and r["step_ms"]]
        if good:  # (bars clamped: a median a hand-edited row puts outside its p10-p90)
            ax.errorbar([r["S"] for r in good], [r["step_ms"] for r in good],
                        yerr=[[max(0, r["step_ms"] - (r["step_ms_p10"] or r["step_ms"]))
                               for r in good],
                              [max(0, (r["step_ms_p90"] or r["step_ms"]) - r["step_ms"])
                               for r in good]],
                        color=c, marker=marker, fillstyle=fill, ls=ls, ms=5, lw=1.4, capsize=2,
                        label=label)
            loud = [r for r in good if noise.noisy(r)]
            if loud:  # drawn hollow, larger: a reader should not trust these
                ax.plot([r["S"] for r in loud], [r["step_ms"] for r in loud], ls="",
                        marker=marker, ms=9, mfc="white", mec=c, mew=1.4, zorder=3)
                extra_handles[f"noisy: p10–p90 > {noise.NOISY_SPREAD:.0%} of median"] = Line2D(
                    [], [], ls="", marker="o", ms=8, mfc="white", mec="0.4")
        floor = [r for r in good if r.get("floor_ms")]
        if floor:  # a bar at each S: a line of one S has no dashes to draw
            ax.plot([r["S"] for r in floor], [r["floor_ms"] for r in floor], ls="--", lw=1,
                    marker="_", ms=10, color=c, alpha=0.8)
            extra_handles["cost-model floor"] = Line2D([], [], ls="--", marker="_", ms=10,
                                                       color="0.4", lw=1)
        oom = [r for r in line if r["status"] == "oom"]
        if oom:
            ax.scatter([r["S"] for r in oom], [0.96] * len(oom), marker="x", s=40, color=c,
                       transform=ax.get_xaxis_transform(), clip_on=False)
            extra_handles["did not fit (oom)"] = Line2D([], [], ls="", marker="x", color="0.4")
    _against_s(fig, ax, rows, "step time (ms, median; bars p10–p90)", extra_handles)
    return fig


def _against_s(fig: Figure, ax: Any, rows: Rows, ylabel: str, extra: dict[str, Line2D]) -> None:
    """Log–log axes over S with `ylabel`, and the legend: the lines, then `extra` entries. A
    point at S = 0 (an empty cache) has no place on a log axis: with one, the axis is linear
    from 0 to the smallest S measured, and logarithmic above it."""
    positive = [r["S"] for r in rows if r["S"] > 0]
    if any(r["S"] == 0 for r in rows):
        ax.set_xscale("symlog", base=2, linthresh=min(positive, default=1), linscale=0.5)
    else:
        ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    log2_axis(ax.xaxis, [r["S"] for r in rows if r["S"] >= 0])
    ax.set_xlabel("context length S (tokens in the cache)")
    ax.set_ylabel(ylabel)
    plain_log(ax.yaxis)
    ax.grid(True, which="both", alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()
    put_legend(fig, handles + list(extra.values()), labels + list(extra))


def memory(rows: Rows, colour: dict[str, str]) -> Figure:
    """Peak memory against S, one line per recipe and B; the device's memory as a line (and a
    run's --memory-budget, which its points had to fit); points that did not fit marked × at
    the memory the cost model says they need."""
    ok = [r for r in rows if r["status"] == "ok" and r["peak_bytes"]]
    need_rows(ok, "ok profile point", _none_ok(rows))
    fig, axes = new_figure("memory", rows)
    ax = axes[0][0]
    extra: dict[str, Line2D] = {}
    drawn = [r["peak_bytes"] for r in ok] + [r["predicted_total_bytes"] for r in rows
                                             if r["status"] == "oom"
                                             and r.get("predicted_total_bytes")]
    unit, size = byte_unit(max(drawn))
    for line, c, marker, (ls, fill), label in _styled(rows, colour):
        good = [r for r in line if r["status"] == "ok" and r["peak_bytes"]]
        if good:
            ax.plot([r["S"] for r in good], [r["peak_bytes"] / size for r in good], color=c,
                    marker=marker, fillstyle=fill, ls=ls, ms=5, lw=1.4, label=label)
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
    for budget in sorted({r["memory_budget"] for r in rows if r.get("memory_budget")}):
        if budget <= DEVICE_LINE_SPAN * max(drawn):
            ax.axhline(budget / size, color="0.3", ls="--", lw=1.2)
            extra[f"--memory-budget {human_bytes(budget)}"] = Line2D([], [], ls="--",
                                                                      color="0.3")
        else:
            extra[f"--memory-budget {human_bytes(budget)}, above the axis (not drawn)"] = Line2D(
                [], [], ls="", color="0.3")
    _against_s(fig, ax, rows, f"peak memory ({unit})", extra)
    return fig



def throughput(rows: Rows, colour: dict[str, str]) -> Figure:
    """Tokens per second against B, one panel per S, one line per recipe (and any other axis
    that varies)."""
    ok = [r for r in rows if r["status"] == "ok" and r["tokens_per_s"]]
    need_rows(ok, "ok profile point", _none_ok(rows))
    if len({r["B"] for r in ok}) == 1:
        return _throughput_by_s(rows, ok, colour)
    s_values = sorted({r["S"] for r in ok})
    cols = min(4, len(s_values))
    n_rows = math.ceil(len(s_values) / cols)
    fig, axes = new_figure("throughput", rows, size=(2.6 * cols + 2.4, 2.6 * n_rows + 0.8),
                        panels=(n_rows, cols), sharey=True)
    key = ("recipe", "G", "K", "dtype", "backend", "device", "run_id")
    varying = varying_keys(ok, key[1:])
    seen: dict[str, Any] = {}
    place = _variants(grouped(ok, key), 1)  # lines of one recipe: a marker and style each
    for i, S in enumerate(s_values):
        ax = axes[i // cols][i % cols]
        for k, line in grouped([r for r in ok if r["S"] == S], key).items():
            label = line_label(line[0], varying)
            (h,) = ax.plot([r["B"] for r in line], [r["tokens_per_s"] for r in line],
                           marker=MARKERS[place[k] % len(MARKERS)],
                           ls=LINE_STYLES[place[k] % len(LINE_STYLES)], ms=4, lw=1.4,
                           color=colour[k[0]])
            seen.setdefault(label, h)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        log2_axis(ax.xaxis, [r["B"] for r in ok], lambda x, _p=None: f"{x:g}")
        ax.set_title(f"S = {tokens(S)}", fontsize=9)
        ax.set_xlabel("batch B (sequences)")
        plain_log(ax.yaxis)
        ax.grid(True, which="both", alpha=0.25)
    for i in range(len(s_values), n_rows * cols):
        axes[i // cols][i % cols].set_visible(False)
    for row in axes:
        row[0].set_ylabel("throughput (tokens/s)")
    put_legend(fig, list(seen.values()), list(seen))
    return fig


def _throughput_by_s(rows: Rows, ok: Rows, colour: dict[str, str]) -> Figure:
    """One B measured: tokens per second against S, one line per recipe (a panel per S would
    hold one dot each)."""
    fig, axes = new_figure(f"throughput at B = {ok[0]['B']}", rows)
    ax = axes[0][0]
    key = ("recipe", "G", "K", "dtype", "backend", "device", "run_id")
    varying = varying_keys(ok, key[1:])
    lines = grouped(ok, key)
    place = _variants(lines, 1)  # lines of one recipe: a marker and style each
    for k, line in lines.items():
        line = sorted(line, key=lambda r: r["S"])
        ax.plot([r["S"] for r in line], [r["tokens_per_s"] for r in line],
                marker=MARKERS[place[k] % len(MARKERS)],
                ls=LINE_STYLES[place[k] % len(LINE_STYLES)], ms=4, lw=1.4, color=colour[k[0]],
                label=line_label(line[0], varying))
    _against_s(fig, ax, ok, "throughput (tokens/s)", {})
    return fig


def roofline(rows: Rows, colour: dict[str, str]) -> Figure:
    """Achieved FLOP rate and bandwidth of each step against its arithmetic intensity (the cost
    model's FLOPs and bytes of the step, over the measured time), with the device's roofs where
    fsc knows them (a CUDA part in its table, or the run's --bandwidth)."""
    ok = [r for r in rows if r["status"] == "ok" and r["step_ms"] and r.get("step_flops")
          and r.get("predicted_step_bytes")]
    need_rows(ok, "ok profile point with the cost model's FLOPs and bytes", _none_ok(rows))
    fig, axes = new_figure("roofline", rows, size=(11.0, 4.6), panels=(1, 2))
    flops_ax, bw_ax = axes[0]
    seen: dict[str, Any] = {}
    intensity_all = []
    for line, c, marker, _style, label in _styled(ok, colour):
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
        else:  # a bandwidth given by --bandwidth: no peak FLOP/s to draw a compute roof from
            seen.setdefault(f"{name}: no compute roof (no peak FLOP/s known)",
                            Line2D([], [], ls=""))
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
        plain_log(ax.xaxis, ax.yaxis)
    if not _roofs(rows):  # in the legend, beside the plot: a note on the axes hides points
        seen["no roof drawn: fsc knows a device's peaks\nonly for the CUDA parts in its table,"
             "\nor a bandwidth from fsc profile --bandwidth"] = Line2D([], [], ls="")
    flops_ax.set_title("marker size grows with S", fontsize=8)
    put_legend(fig, list(seen.values()), list(seen))
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
