"""The quality figure (`fsc plot quality`): what text quality a decoding setting costs in
speed. One panel per scorer, data, length and prompt length (Gen-PPL under one scorer of one
text at one length is comparable; across them it is not): Gen-PPL against tokens/s, one line per
backbone and decoding setting (policy, threshold, G, temperature where they vary), each point
labelled by K, the scorer's interval as bars, and the reference text's own Gen-PPL (the data's
continuations of the same prompts) as a dashed line; below, the samples' entropy on the same axis, with the text's entropy, since a sampler
that repeats itself scores well too.

What varies is spread over colour, line style and marker (backbone first, then policy, then
the other settings; the policy never by line style alone, which a line of one point does not
show), and the legend lists each value once: a grid of 2 K × 4 policies × 2 τ × 2 T reads as 4
colours (and markers) and 4 line styles, not 16 labels. Tokens/s is the speed of the samples
decoded together, so the speed axis names that batch (and the legend, where runs differ)."""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fsc.eval.columns import CUTS, as_drawn
from fsc.results.axes import (
    MARKERS,
    PALETTE,
    STYLES,
    Rows,
    grouped,
    need_rows,
    new_figure,
    plain_log,
    put_legend,
    wrapped,
)

SAMPLED = ("top_p", "top_k", "min_p", "repetition_penalty")  # how tokens were drawn, besides T
SETTING = ("G", "policy", "threshold", "temperature", *SAMPLED)  # besides K, what may vary
OTHER = ("G", "threshold", "temperature", *SAMPLED)  # the settings besides the policy
OTHER_NAMES = {"G": "block size", "threshold": "threshold", "temperature": "temperature",
               "top_p": "nucleus mass", "top_k": "top-k", "min_p": "min-p",
               "repetition_penalty": "repetition penalty"}
PANEL = ("scorer", "data", "length", "prompt_length")  # what makes Gen-PPL comparable
# the data's own continuations of the prompts (a shipped corpus's val split, or a user's file)
REFERENCE_NAME = "reference text"
REFERENCE = {"color": "0.6", "ls": (0, (6, 3)), "lw": 1.8}  # the reference text's lines:
# lighter and wider than any line style of the legend
AR_MARKER = "*"
LABEL_ROOM = (0.05, 0.03)  # a K label this near another (fractions of the axes: about its own
# width and height) would overlap it, and is not drawn
LABEL_INWARD = 0.8  # a point past this fraction of the span is labelled on its inner side


def quality_cells(rows: Rows) -> Rows:
    """The genppl rows the figure draws (those with a Gen-PPL), each sampling setting stored
    before it was recorded at the value it drew with (columns.as_drawn)."""
    return [as_drawn(r) for r in rows if r["task"] == "genppl" and r.get("gen_ppl") is not None]


def decoded_together(row: dict) -> int | None:
    """How many samples a genppl cell decoded at once, which its tokens/s is the speed of: its
    run's --batch (the row's `batch`, fsc.results.select.RUN_BATCH), or every sample when it
    has fewer; None for a run recorded without its request."""
    if row.get("batch") is None:
        return None
    return min(row["batch"], row.get("n") or row["batch"])


def _speed_label(batches: set) -> str:
    """The speed axis's name, with the batch its tokens/s were decoded at (several: the legend
    says each line's)."""
    known = batches - {None}
    if len(batches) > 1:
        return "decoding speed (generated tokens/s) · batch varies (see legend)"
    return "decoding speed (generated tokens/s" + (f", batch {known.pop()})" if known else ")")


def _value(row: dict, key: str) -> str:
    v = row.get(key)
    names = {"G": "G {}", "threshold": "τ {}", "temperature": "T {}",
             **{k: f"{said} {{}}" for k, said, _ in CUTS}}
    text = "none" if v is None else v if isinstance(v, str) else f"{v:g}"
    return names.get(key, "{}").format(text)


def _panel_name(key: tuple, fields: list[str]) -> str:
    """A panel's scorer, data, length and prompt length, those in `fields`, in words."""
    said = dict(zip(PANEL, key, strict=True))
    words = {"scorer": "under {}", "data": "{}", "length": "{} tokens",
             "prompt_length": "after {}-token prompts"}
    if said["prompt_length"] == 0:
        words["prompt_length"] = "from BOS"
    said["scorer"] = _here(said["scorer"])
    return ", ".join(words[f].format(said[f]) for f in fields if said[f] is not None)


def _here(scorer):
    """A scorer as the store names it (`NAME (PATH)`, or a path), its absolute path relative
    to the working directory where it lies below it: a figure drawn in the project's folder
    names no machine's paths."""
    if not isinstance(scorer, str):
        return scorer
    name, paren, path = scorer.rpartition(" (")
    if paren and path.endswith(")"):
        return f"{name} ({_here(path[:-1])})"
    try:
        return str(Path(scorer).relative_to(Path.cwd())) if scorer.startswith("/") else scorer
    except ValueError:
        return scorer


def _channels(values: dict[str, list[str]]) -> dict[str, list[str]]:
    """The channels (colour, style, marker) each dimension that varies (`values`: backbone,
    policy, other) is drawn by: the backbone by colour; the policy by colour where the
    backbone leaves it, else by marker; the other settings by what is left (line style where
    they have no more values than there are styles, else marker). The policy also takes the
    marker where it is left, and a policy drawn by marker the line style where that is left.
    A line of one point (a single K) shows no line style, so the policy is never told by line
    style alone."""
    free, taken = ["colour", "style", "marker"], {}

    def take(dim: str, channel: str) -> None:
        taken.setdefault(dim, []).append(channel)
        if channel in free:
            free.remove(channel)

    if "backbone" in values:
        take("backbone", "colour")
    if "policy" in values:
        take("policy", "colour" if "colour" in free else "marker")
    if "other" in values:
        fits = len(values["other"]) <= len(STYLES)
        take("other", "colour" if "colour" in free else "style" if fits or "marker" not in free
             else "marker")
    if "policy" in values and "marker" in free:
        take("policy", "marker")
    if taken.get("policy") == ["marker"] and "style" in free:
        take("policy", "style")
    return taken


class _Channels:
    """Which colour, line style and marker each line takes (see `_channels`)."""

    def __init__(self, decoded: Rows, colour: dict[str, str]):
        diffusion = [c for c in decoded if c["mode"] == "diffusion"]
        self.other = [k for k in OTHER if len({c.get(k) for c in diffusion}) > 1]
        recipes = {}
        for c in decoded:
            recipes.setdefault(c["recipe"], set()).add(c["run_id"])
        self.runs_shown = any(len(runs) > 1 for runs in recipes.values())
        self.batches = {decoded_together(c) for c in decoded}
        dims = {"backbone": sorted({self.backbone(c) for c in decoded}),
                "policy": sorted({c.get("policy") or "confidence" for c in diffusion}),
                "other": sorted({self.setting(c) for c in diffusion})}
        self.values = {d: v for d, v in dims.items() if len(v) > 1}
        self.channel = _channels(self.values)
        self.recipe_colour = colour
        self.by_recipe = ("colour" in self.channel.get("backbone", [])
                          and len({colour[_recipe(b)] for b in dims["backbone"]})
                          == len(dims["backbone"]))

    def backbone(self, c: dict) -> str:
        """A line's backbone: its recipe (and run, where a recipe comes from several; and the
        batch it decoded at, where the runs' differ)."""
        name = f"{c['recipe']} (ar)" if c["mode"] == "ar" else c["recipe"]
        if self.runs_shown:
            name += f" · {c['run_id']}"
        if len(self.batches) > 1:
            batch = decoded_together(c)
            name += f" · batch {'unknown' if batch is None else batch}"
        return name

    def setting(self, c: dict) -> str:
        return " ".join(_value(c, k) for k in self.other)

    def dims(self, c: dict) -> dict[str, str]:
        found = {"backbone": self.backbone(c)}
        if c["mode"] == "diffusion":
            found |= {"policy": c.get("policy") or "confidence", "other": self.setting(c)}
        return found

    def look(self, dim: str, value: str) -> dict:
        """The line properties one value of a dimension gives."""
        props: dict = {}
        for ch in self.channel.get(dim, []):
            i = self.values[dim].index(value)
            if ch == "colour" and dim == "backbone" and self.by_recipe:
                props["color"] = self.recipe_colour[_recipe(value)]
            elif ch == "colour":
                props["color"] = PALETTE[i % len(PALETTE)]
            elif ch == "style":
                props["ls"] = STYLES[i % len(STYLES)]
            else:  # the star is an AR line's
                props["marker"] = MARKERS[i % (len(MARKERS) - 1)]
        return props

    def of(self, c: dict) -> dict:
        """A line's colour, style and marker (an AR line: a star)."""
        props = {"color": self.recipe_colour[c["recipe"]], "ls": "-", "marker": "o"}
        if any("colour" in chs for chs in self.channel.values()):
            props["color"] = "0.15"
        for dim, value in self.dims(c).items():
            if dim in self.channel:
                props |= self.look(dim, value)
        if c["mode"] == "ar":
            props["marker"] = AR_MARKER
        return props

    def label(self, c: dict) -> str:
        """A line's name: its backbone, and its policy and settings where they vary."""
        found = self.dims(c)
        return " · ".join([found["backbone"]] + [found[d] for d in ("policy", "other")
                                                 if d in self.values and d in found])

    def legend(self) -> dict[str, Line2D]:
        """One entry per value of each dimension that varies (headed by its name), or the one
        line's name when nothing varies."""
        entries: dict[str, Line2D] = {}
        heads = {"backbone": "backbone", "policy": "policy",
                 "other": ", ".join(OTHER_NAMES[k] for k in self.other)}
        for dim, values in self.values.items():
            entries[f"{heads[dim]}:"] = Line2D([], [], ls="")
            for v in values:
                props = {"color": "0.15", "ls": "-", "marker": ""} | self.look(dim, v)
                if dim == "backbone" and v.split(" · ")[0].endswith(" (ar)"):
                    props["marker"] = AR_MARKER
                entries[v] = Line2D([], [], lw=1.3, ms=5, **props)
        return entries


def _recipe(backbone: str) -> str:
    """The recipe a backbone's name names ('attn (ar) · RUN' -> 'attn')."""
    return backbone.split(" · ")[0].removesuffix(" (ar)")


def quality(rows: Rows, colour: dict[str, str]) -> Figure:
    """The figure of the genppl rows among `rows`: a panel per scorer, data, length and prompt
    length (see the module docstring), `colour` a colour per recipe (used when the backbone is
    what colour tells apart)."""
    cells = quality_cells(rows)
    need_rows(cells, "genppl cell", "fsc eval --task genppl records them")
    decoded = [c for c in cells if c["mode"] != "reference"]
    need_rows(decoded, "decoded genppl cell", "the reference text's rows alone, which a "
              "--where never drops")
    panels = grouped(decoded, PANEL)
    refs = grouped([c for c in cells if c["mode"] == "reference"], PANEL)
    varying = [f for i, f in enumerate(PANEL) if len({k[i] for k in panels}) > 1]
    common = [f for f in PANEL if f not in varying]
    first = next(iter(panels))
    what = "generative perplexity against decoding speed"
    blocks = {c["G"] for c in decoded if c["mode"] == "diffusion"}
    if len(blocks) == 1:  # one G for every line: said once (a line says its own where they vary)
        what += f" · G {blocks.pop()}"
    if _panel_name(first, common):
        what += f" · {_panel_name(first, common)}"
    cols = min(3, len(panels))
    n_rows = math.ceil(len(panels) / cols)
    size = (8.0, 6.4) if len(panels) == 1 else (4.3 * cols + 2.8, 5.6 * n_rows + 0.6)
    # the title names the runs drawn: a reference row a --where kept is drawn only beside
    # its run's decoded cells
    fig, axes = new_figure(what, decoded, size=size, panels=(2 * n_rows, cols),
                           height_ratios=[3, 2] * n_rows)
    look = _Channels(decoded, colour)
    several_refs = False
    for i, (key, panel) in enumerate(panels.items()):
        ppl_ax, ent_ax = axes[2 * (i // cols)][i % cols], axes[2 * (i // cols) + 1][i % cols]
        ent_ax.sharex(ppl_ax)
        several_refs |= _draw_panel(ppl_ax, ent_ax, panel, refs.get(key, []), look)
        if varying:
            ppl_ax.set_title(wrapped(_panel_name(key, varying), size[0] / cols - 0.4, 8),
                             fontsize=8)
        ppl_ax.tick_params(which="both", labelbottom=False)
        if i % cols == 0:
            ppl_ax.set_ylabel("Gen-PPL under the scorer")
            ent_ax.set_ylabel("unigram entropy per\nsample (nats)")
        ent_ax.set_xlabel(wrapped(_speed_label(look.batches), size[0] / cols - 0.4))
    for i in range(len(panels), n_rows * cols):
        axes[2 * (i // cols)][i % cols].set_visible(False)
        axes[2 * (i // cols) + 1][i % cols].set_visible(False)
    entries = look.legend() if look.values else {
        look.label(decoded[0]): Line2D([], [], **look.of(decoded[0]))}
    if refs:
        entries[REFERENCE_NAME + (" (of the run named on it)" if several_refs else "")] = Line2D(
            [], [], **REFERENCE)
    if any(c["mode"] == "diffusion" for c in decoded):
        entries["K n: denoising steps per block"] = Line2D([], [], ls="")
    put_legend(fig, list(entries.values()), list(entries))
    return fig


def _draw_panel(ppl_ax, ent_ax, panel: Rows, refs: Rows, look: _Channels) -> bool:
    """One panel: its lines, their K labels and its reference lines (one per distinct value,
    labelled by run when there are several). True when there are several."""
    decoded = [c for c in panel if c["mode"] != "reference"]
    # the yardstick of the runs drawn here (a --where may have dropped a run's cells)
    refs = [r for r in refs if r["run_id"] in {c["run_id"] for c in decoded}]
    labels: list[tuple[float, float]] = []
    span = _span([c["tokens_per_s"] for c in decoded if c.get("tokens_per_s")],
                 [c["gen_ppl"] for c in decoded] + [r["gen_ppl"] for r in refs])
    for _key, line in grouped(decoded, ("recipe", "run_id", "mode", *SETTING)).items():
        line = sorted(line, key=lambda c: c["tokens_per_s"] or 0)
        props = look.of(line[0])
        ms = 7 if line[0]["mode"] == "ar" else 4
        x = [c["tokens_per_s"] for c in line]
        ppl_ax.errorbar(x, [c["gen_ppl"] for c in line], yerr=_bars(line), ms=ms, lw=1.3,
                        capsize=2, label=look.label(line[0]), **props)
        ent_ax.plot(x, [c["entropy"] for c in line], ms=ms, lw=1.3, **props)
        if line[0]["mode"] != "diffusion":
            continue
        for c in line:
            at = span(c["tokens_per_s"], c["gen_ppl"])
            if at is None or any(abs(at[0] - a) < LABEL_ROOM[0] and abs(at[1] - b) < LABEL_ROOM[1]
                                 for a, b in labels):
                continue
            labels.append(at)
            # a label beside the fastest or the worst point goes inward, not past the axes
            right, top = at[0] > LABEL_INWARD, at[1] > LABEL_INWARD
            ppl_ax.annotate(f"K {c['K']}", (c["tokens_per_s"], c["gen_ppl"]),
                            textcoords="offset points",
                            xytext=(-4 if right else 4, -4 if top else 4),
                            ha="right" if right else "left", va="top" if top else "bottom",
                            fontsize=7, color=props["color"])
    distinct = list({round(r["gen_ppl"], 6): r for r in refs}.values())
    for r in distinct:
        name = REFERENCE_NAME + (f" · {r['run_id']}" if len(distinct) > 1 else "")
        ppl_ax.axhline(r["gen_ppl"], label=name, **REFERENCE)
        if len(distinct) > 1:  # other prompts (another seed or --samples): whose line is whose
            ppl_ax.annotate(r["run_id"], (1, r["gen_ppl"]), xycoords=("axes fraction", "data"),
                            xytext=(-2, 2), textcoords="offset points", ha="right", fontsize=6,
                            color="0.4")
        if r.get("entropy") is not None:
            ent_ax.axhline(r["entropy"], **REFERENCE)
    for ax in (ppl_ax, ent_ax):
        ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.25)
    ppl_ax.set_yscale("log")
    plain_log(ppl_ax.yaxis, ppl_ax.xaxis, ent_ax.xaxis)
    return len(distinct) > 1


def _span(xs: list[float], ys: list[float]):
    """Where a point sits on log axes spanning `xs` and `ys`, as fractions (for telling
    labels that would overlap); None for a point off a log axis."""
    def frac(values):
        good = [math.log10(v) for v in values if v and v > 0]
        lo, hi = (min(good), max(good)) if good else (0.0, 1.0)
        return lambda v: (math.log10(v) - lo) / ((hi - lo) or 1.0)

    fx, fy = frac(xs), frac(ys)
    return lambda x, y: (fx(x), fy(y)) if x and y and x > 0 and y > 0 else None


def _bars(line: Rows):
    """Asymmetric error bars from the bootstrap interval (none where a cell has none)."""
    if any(c.get("gen_ppl_lo") is None for c in line):
        return None
    return [[c["gen_ppl"] - c["gen_ppl_lo"] for c in line],
            [c["gen_ppl_hi"] - c["gen_ppl"] for c in line]]
