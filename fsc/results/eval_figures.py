"""The training and evaluation figures (`fsc plot loss`, `niah`, `retrieval`, `ruler`):
training loss against step, needle retrieval as a heatmap, retrieval and RULER's score against
length ÷ training length; and the cells of the evaluation view each one draws.
"""

from __future__ import annotations

import math
from collections import defaultdict

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fsc.eval import columns
from fsc.results.axes import (
    MARKERS,
    STYLES,
    Rows,
    grouped,
    log2_axis,
    need_rows,
    new_figure,
    places,
    plain_log,
    put_legend,
    run_label,
    tokens,
)


def loss(rows: Rows, colour: dict[str, str]) -> Figure:
    """Training loss against optimizer step, one line per run, one panel per task (data and
    objective: losses of different tasks do not share an axis); the in-loop eval accuracy
    below when the runs logged it."""
    need_rows(rows, "training step", "fsc train records them")
    acc = [r for r in rows if r.get("eval_accuracy") is not None]

    def task(r) -> str:
        return f"{r['data']} ({r['objective']})" if r.get("data") else ""

    tasks = sorted({task(r) for r in rows})
    place = places((r["recipe"], r["run_id"]) for r in rows)  # a recipe's runs: line styles
    title = "training loss" + (f" on {tasks[0]}" if len(tasks) == 1 and tasks[0] else "")
    fig, axes = new_figure(title, rows, size=(8.0 if len(tasks) == 1 else 5.0 * len(tasks) + 2,
                                           6.0 if acc else 4.4),
                        panels=(2 if acc else 1, len(tasks)), sharex="col",
                        **({"height_ratios": [3, 1]} if acc else {}))
    for col, name in enumerate(tasks):
        ax = axes[0][col]
        if len(tasks) > 1:
            ax.set_title(name, fontsize=9)
        for (run_id, recipe), line in grouped([r for r in rows if task(r) == name],
                                              ("run_id", "recipe")).items():
            n = place[(recipe, run_id)]
            look = {"color": colour[recipe], "ls": STYLES[n % len(STYLES)]}
            # a run of one logged step is a point: a line alone would draw nothing
            ax.plot([r["step"] for r in line], [r["loss"] for r in line], lw=1.2,
                    marker=MARKERS[n % len(MARKERS)] if len(line) == 1 else "", ms=4,
                    label=run_label(line[-1], _several(place, recipe)), **look)
            got = [r for r in line if r.get("eval_accuracy") is not None]
            if got:
                axes[1][col].plot([r["step"] for r in got], [r["eval_accuracy"] for r in got],
                                  marker=MARKERS[n % len(MARKERS)], ms=3, lw=1, **look)
        ax.set_yscale("log")
        plain_log(ax.yaxis)
        ax.grid(True, which="both", alpha=0.25)
        if acc:
            axes[1][col].set_ylim(-0.03, 1.03)
            axes[1][col].grid(True, alpha=0.25)
            if not any(r.get("eval_accuracy") is not None and task(r) == name for r in acc):
                axes[1][col].text(0.5, 0.5, "no in-loop eval logged (--eval-every)",
                                  transform=axes[1][col].transAxes, ha="center", va="center",
                                  fontsize=8, color="0.4")
        axes[-1][col].xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole
        steps = {r["step"] for r in rows if task(r) == name}
        if len(steps) == 1:  # around the one step, with whole steps on the axis
            axes[-1][col].set_xlim(min(steps) - 1, min(steps) + 1)
        axes[-1][col].set_xlabel("optimizer step")
    axes[0][0].set_ylabel("loss (nats per token)")
    if acc:
        axes[1][0].set_ylabel("eval exact match")
    handles, labels = [], []
    for ax in axes[0]:
        h, lab = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    put_legend(fig, handles, labels)
    return fig


def _several(place: dict[tuple[str, str], int], recipe: str) -> bool:
    """Whether `recipe` is drawn from several runs (see axes.places)."""
    return sum(1 for r, _ in place if r == recipe) > 1


METRICS = {"accuracy": "exact match (fraction of items)",
           "token_accuracy": "token accuracy (fraction of scored tokens)"}


def _metric(cells: Rows, metric: str) -> float:
    """The metric over cells, weighted by their item counts."""
    n = sum(c["n"] for c in cells)
    return sum(c[metric] * c["n"] for c in cells) / n if n else float("nan")


def passkey(row) -> bool:
    """A niah cell of the plain passkey (fsc.eval.columns.plain_passkey)."""
    return columns.plain_passkey(row)


def niah_cells(rows: Rows, metric: str = "accuracy") -> Rows:
    """The evaluation rows the niah heatmap draws: the passkey's (a ruler run's variants at the
    same length and depth would draw over them)."""
    return [r for r in rows if passkey(r) and r.get(metric) is not None]


LINES = {"niah": "-", "mqar": "--", "copy": ":"}  # the retrieval figure's tasks, by line style


def retrieval_cells(rows: Rows, metric: str = "accuracy") -> Rows:
    """The evaluation rows the retrieval figure draws."""
    return [r for r in rows if (r["task"] in ("mqar", "copy") or passkey(r))
            and r.get("length_ratio") and r.get(metric) is not None]


def niah(rows: Rows, colour: dict[str, str], metric: str = "accuracy") -> Figure:
    """Needle retrieval as a length × depth heatmap, one panel per checkpoint."""
    cells = niah_cells(rows, metric)
    need_rows(cells, "niah cell", "fsc eval --task niah records them")
    panels = grouped(cells, ("recipe", "run_id", "checkpoint"))
    place = places((r["recipe"], r["run_id"]) for r in cells)
    cols = min(3, len(panels))
    n_rows = math.ceil(len(panels) / cols)
    fig, axes = new_figure(f"needle in a haystack: {metric.replace('_', ' ')}", cells,
                        size=(3.6 * cols + 1.2, 3.2 * n_rows + 0.8), panels=(n_rows, cols))
    image = None
    for i, ((recipe, _run_id, _ckpt), panel) in enumerate(panels.items()):
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
        ax.set_title(run_label(panel[0], _several(place, recipe)) if several else recipe,
                     fontsize=8, color=colour[recipe])
    for i in range(len(panels), n_rows * cols):
        axes[i // cols][i % cols].set_visible(False)
    fig.colorbar(image, ax=axes, shrink=0.8, label=METRICS[metric])
    return fig


def retrieval(rows: Rows, colour: dict[str, str], metric: str = "accuracy") -> Figure:
    """Retrieval (over every depth or pair count) and copying against length ÷ training
    length, one line per backbone (and task, when more than one is shown)."""
    cells = retrieval_cells(rows, metric)
    need_rows(cells, "niah, mqar or copy cell with a training length",
              "fsc eval RUN_DIR (a trained checkpoint) records them")
    fig, axes = new_figure(f"retrieval against length: {metric.replace('_', ' ')}", cells)
    ax = axes[0][0]
    tasks = len({c["task"] for c in cells}) > 1
    place = places((r["recipe"], r["run_id"]) for r in cells)
    for (recipe, task, run_id), line in grouped(cells, ("recipe", "task", "run_id")).items():
        by_ratio = grouped(line, ("length_ratio",))
        x = [k[0] for k in by_ratio]
        # the task by line style (and marker), a recipe's runs by marker: o s, then ^ D, ...
        shape = MARKERS[(2 * place[(recipe, run_id)] + (task == "mqar")) % len(MARKERS)]
        label = run_label(line[0], _several(place, recipe))
        if tasks:
            label = label.replace(f"{recipe} · ", f"{recipe} · {task} · ", 1)
        ax.plot(x, [_metric(v, metric) for v in by_ratio.values()], lw=1.4, ms=4,
                marker=shape, ls=LINES[task], color=colour[recipe],
                label=label)
    ax.set_xscale("log", base=2)
    log2_axis(ax.xaxis, [c["length_ratio"] for c in cells], lambda x, _p=None: f"{x:g}×")
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("prompt length ÷ training length")
    over = [o for t, o in (("niah", "depths"), ("mqar", "pair counts"))
            if any(c["task"] == t for c in cells)]  # (a copy cell is one of its length)
    ax.set_ylabel(METRICS[metric] + (f",\nmean over {' or '.join(over)}" if over else ""))
    ax.grid(True, alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()
    put_legend(fig, handles, labels)
    return fig


RULER_ORDER = ("niah single", "niah multikey", "niah multivalue", "niah multiquery", "vt",
               "cwe", "fwe")  # the suite's parts as `fsc eval --task ruler` scores them


def ruler_part(row: dict) -> str:
    """The suite's part a cell belongs to: its task, niah with its variant."""
    return f"niah {row.get('variant') or 'single'}" if row["task"] == "niah" else row["task"]


def ruler_cells(rows: Rows) -> Rows:
    """The evaluation rows the RULER figure draws: scored cells with a training length, of
    the runs that scored a part of the suite besides the plain passkey (`fsc eval --task niah`
    scores its passkey cells too: such a run alone is not a RULER run, and its cells would
    read as the suite's `niah single` and `average`)."""
    scored = [r for r in rows if r.get("score") is not None and r.get("length_ratio")]
    suite = {(r["run_id"], r["recipe"]) for r in scored if not passkey(r)}
    return [r for r in scored if (r["run_id"], r["recipe"]) in suite]


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
    need_rows(cells, "RULER-style cell with a training length",
              "fsc eval RUN_DIR --task ruler (a trained checkpoint) records them; plain passkey "
              "cells alone are drawn by fsc plot niah and retrieval")
    scores = ruler_scores(cells)
    held = {p for parts in scores.values() for p in parts if p != "average"}
    names = [p for p in RULER_ORDER if p in held] + sorted(held - set(RULER_ORDER))
    names.append("average")
    cols = min(4, len(names))
    n_rows = math.ceil(len(names) / cols)
    fig, axes = new_figure("RULER-style score against length", cells,
                        size=(3.0 * cols + 1.0, 2.6 * n_rows + 1.2), panels=(n_rows, cols),
                        sharex=True, sharey=True)
    several = len({run for _, run in scores}) > len({recipe for recipe, _ in scores})
    place = places(scores)
    first = {(r["recipe"], r["run_id"]): r for r in reversed(cells)}
    for i, name in enumerate(names):
        ax = axes[i // cols][i % cols]
        for (recipe, run_id), parts in scores.items():
            if parts.get(name):
                x = sorted(parts[name])
                n = place[(recipe, run_id)]
                ax.plot(x, [parts[name][v] for v in x], marker=MARKERS[n % len(MARKERS)], ms=3,
                        lw=1.3, ls=STYLES[n % len(STYLES)], color=colour[recipe],
                        label=run_label(first[(recipe, run_id)], _several(place, recipe))
                        if several else recipe)
        ax.set_title(name, fontsize=9, weight="bold" if name == "average" else "normal")
        ax.set_xscale("log", base=2)
        log2_axis(ax.xaxis, [c["length_ratio"] for c in cells], lambda x, _p=None: f"{x:g}×")
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
    put_legend(fig, handles, labels)
    return fig
