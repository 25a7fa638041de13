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
