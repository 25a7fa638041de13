"""The quality figure (`fsc plot quality`): what text quality a decoding setting costs in
speed. Gen-PPL against tokens/s, one line per backbone (and per policy, threshold, G and
temperature where they vary), each point labelled by K, the scorer's interval as bars, and
the validation text's own Gen-PPL as a dashed line; below, the samples' entropy on the same
axis, with the text's entropy, since a sampler that repeats itself scores well too."""

from __future__ import annotations

from matplotlib.figure import Figure

from fsc.results.figures import Rows, _figure, _legend, _need, _plain_log, grouped

SETTING = ("G", "policy", "threshold", "temperature")  # what, besides K, may vary in a line
STYLE = ("-", "--", "-.", ":")


def quality_cells(rows: Rows) -> Rows:
    """The genppl rows the figure draws (those with a Gen-PPL)."""
    return [r for r in rows if r["task"] == "genppl" and r.get("gen_ppl") is not None]


def _setting(row: dict, varying: list[str]) -> str:
    names = {"G": "G {}", "policy": "{}", "threshold": "τ {}", "temperature": "T {}"}
    return " ".join(names[k].format("none" if row.get(k) is None else f"{row[k]:g}"
                                    if not isinstance(row.get(k), str) else row[k])
                    for k in varying)


def quality(rows: Rows, colour: dict[str, str]) -> Figure:
    cells = quality_cells(rows)
    _need(cells, "genppl cell", "fsc eval --task genppl records them")
    decoded = [c for c in cells if c["mode"] != "reference"]
    refs = [c for c in cells if c["mode"] == "reference"]
    fig, axes = _figure("generative perplexity against decoding speed", cells, size=(8.0, 6.4),
                        panels=(2, 1), sharex=True, height_ratios=[3, 2])
    ppl_ax, ent_ax = axes[0][0], axes[1][0]
    varying = [k for k in SETTING if len({c.get(k) for c in decoded
                                          if c["mode"] == "diffusion"}) > 1]
    styles = {}
    for (recipe, run_id, mode, *setting), line in grouped(
            decoded, ("recipe", "run_id", "mode", *SETTING)).items():
        line = sorted(line, key=lambda c: c["tokens_per_s"] or 0)
        key = tuple(setting)
        ls = styles.setdefault(key, STYLE[len(styles) % len(STYLE)])
        x = [c["tokens_per_s"] for c in line]
        label = f"{recipe}{' (ar)' if mode == 'ar' else ''}"
        if varying and mode == "diffusion":
            label += f" · {_setting(line[0], varying)}"
        marker = "*" if mode == "ar" else "o"
        ppl_ax.errorbar(x, [c["gen_ppl"] for c in line], yerr=_bars(line), color=colour[recipe],
                        ls=ls, marker=marker, ms=6 if mode == "ar" else 4, lw=1.3, capsize=2,
                        label=f"{label} · {run_id}")
        ent_ax.plot(x, [c["entropy"] for c in line], color=colour[recipe], ls=ls,
                    marker=marker, ms=6 if mode == "ar" else 4, lw=1.3)
        for c in line:
            if mode == "diffusion":
                ppl_ax.annotate(f"K {c['K']}", (c["tokens_per_s"], c["gen_ppl"]),
                                textcoords="offset points", xytext=(4, 4), fontsize=7,
                                color=colour[recipe])
    for ref in {(r["scorer"], round(r["gen_ppl"], 6)): r for r in refs}.values():
        ppl_ax.axhline(ref["gen_ppl"], color="0.35", ls="--", lw=1,
                       label=f"validation text ({ref['scorer']})")
        ent_ax.axhline(ref["entropy"], color="0.35", ls="--", lw=1)
    ppl_ax.set_yscale("log")
    ppl_ax.set_ylabel("Gen-PPL under the scorer")
    ent_ax.set_ylabel("unigram entropy per\nsample (nats)")
    ent_ax.set_xlabel("decoding speed (generated tokens/s, batch 1)")
    for ax in (ppl_ax, ent_ax):
        ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.25)
    _plain_log(ppl_ax.yaxis, ppl_ax.xaxis, ent_ax.xaxis)
    handles, labels = ppl_ax.get_legend_handles_labels()
    _legend(fig, handles, labels)
    return fig


def _bars(line: Rows):
    """Asymmetric error bars from the bootstrap interval (none where a cell has none)."""
    if any(c.get("gen_ppl_lo") is None for c in line):
        return None
    return [[c["gen_ppl"] - c["gen_ppl_lo"] for c in line],
            [c["gen_ppl_hi"] - c["gen_ppl"] for c in line]]
