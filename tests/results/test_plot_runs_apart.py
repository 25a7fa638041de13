"""`fsc plot` of two profile runs of the same recipes: a line per run, never one line that
zigzags between the two runs' points at each S (or B)."""

from __future__ import annotations

import pytest
from results_helpers import make_runs

from fsc.results import figures


@pytest.mark.parametrize("kind", ["latency", "memory", "throughput"])
def test_two_runs_of_one_recipe_are_two_lines(kind, cli, tmp_path, monkeypatch):
    made = make_runs(tmp_path / "store")
    drawn = []
    real_save = figures.save
    monkeypatch.setattr(figures, "save", lambda fig, path: (drawn.append(fig),
                                                            real_save(fig, path)))
    out = tmp_path / f"{kind}.svg"
    r = cli("plot", kind, "--run", made.run_a, "--run", made.run_b, "--where",
            "recipe = 'tiny_attn' and B = 1", "--store", made.store, "--out", out)
    assert r.code == 0, r.err
    (fig,) = drawn
    labels = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    lines = [label for label in labels if label.startswith("tiny_attn")]
    # a line a run, in run id order (time first: two runs begun in one second, by suffix)
    assert lines == [f"tiny_attn · {r}" for r in sorted([made.run_a, made.run_b])], labels
    for ax in fig.axes:  # each line's S (or B) values rise: no line goes back and forth
        for line in ax.get_lines():
            xs = list(line.get_xdata())
            assert xs == sorted(set(xs)), xs


def _looks(fig) -> list[tuple]:
    """(colour, marker, line style, fill) of each data line of a figure's first axes (not an
    error bar's cap, nor a floor)."""
    return [(line.get_color(), line.get_marker(), line.get_linestyle(), line.get_fillstyle())
            for line in fig.axes[0].get_lines() if line.get_marker() not in ("_", "None")]


@pytest.mark.parametrize("kind", ["latency", "memory"])
def test_lines_of_one_recipe_and_B_look_apart_at_one_S_and_past_four(kind):
    """Lines of one recipe and B that differ in G, K or the run were set apart by their line
    style alone, from four that repeat: a line of one S shows no style, and a fifth looked as
    the first. Their markers' fill tells them apart as well: four by the fill alone (a point
    each), 16 by style and fill."""
    from results_helpers import point

    from fsc.results import profile_figures

    colour = figures.colours(["tiny_mamba"])
    rows = [point("tiny_mamba", 1024, 1, 1.0 + g, G=g, run_id="r") for g in range(1, 5)]
    assert len({look[3] for look in _looks(getattr(profile_figures, kind)(rows, colour))}) == 4
    rows = [point("tiny_mamba", S, 1, 1.0 + g, G=g, run_id="r") for g in range(1, 7)
            for S in (1024, 4096)]
    looks = _looks(getattr(profile_figures, kind)(rows, colour))
    assert len(looks) == 6 and len(set(looks)) == 6, looks
    assert len({profile_figures._look(p) for p in range(16)}) == 16


def test_a_floor_at_one_S_is_drawn_and_a_median_outside_its_spread_draws(tmp_path):
    """The floor of a line of one S was a dashed line of one point: nothing to see, though the
    legend named it. A median below its own p10 (a row edited by hand) stopped the figure,
    and the whole report, with an internal error."""
    from results_helpers import point

    from fsc.results import profile_figures

    rows = [point("tiny_attn", 1024, 1, 2.0, run_id="r"),
            point("tiny_attn", 4096, 1, 3.0, step_ms_p10=3.5, run_id="r")]
    fig = profile_figures.latency(rows[:1], figures.colours(["tiny_attn"]))
    [floor] = [ln for ln in fig.axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert floor.get_marker() not in ("None", "", None)
    profile_figures.latency(rows, figures.colours(["tiny_attn"]))  # draws
