"""fsc plot quality: Gen-PPL against tokens/s, a line per backbone, points labelled by K, the
reference text as a dashed line; fsc report shows it with the genppl table."""

import pytest

from fsc.cli.query import declared
from fsc.results import plots
from fsc.store import Store


def _cells(recipe: str, ppl: list[float], speed: list[float]) -> list[dict]:
    rows = [{"checkpoint": "c", "recipe": recipe, "recipe_hash": "h", "task": "genppl",
             "mode": "reference", "length": 32, "n": 4, "gen_ppl": 5.0, "gen_ppl_lo": 4.5,
             "gen_ppl_hi": 5.5, "entropy": 3.0, "scorer": "ar_scorer"}]
    for K, p, s in zip((1, 2, 4), ppl, speed, strict=True):
        rows.append({"checkpoint": "c", "recipe": recipe, "recipe_hash": "h", "task": "genppl",
                     "mode": "diffusion", "G": 4, "K": K, "policy": "confidence",
                     "temperature": 1.0, "length": 32, "n": 4, "gen_ppl": p,
                     "gen_ppl_lo": p * 0.9, "gen_ppl_hi": p * 1.1, "entropy": 2.9,
                     "tokens_per_s": s, "scorer": "ar_scorer"})
    return rows


@pytest.fixture
def quality_store(tmp_path):
    st = Store(tmp_path / "store")
    for recipe, ppl in (("attn", [40.0, 20.0, 10.0]), ("mamba", [50.0, 22.0, 11.0])):
        with st.run("eval", "fsc eval", {}) as run:
            run.add_rows("eval_cells", _cells(recipe, ppl, [400.0, 200.0, 100.0]),
                         declared()["eval_cells"])
    return st


def test_quality_draws_a_line_per_backbone_labelled_by_k(quality_store):
    drawn = plots.draw(quality_store, "quality")
    ax = drawn.figure.axes[0]
    lines = {c.get_label().split(" · ")[0]: c.lines[0] for c in ax.containers}
    assert {"attn", "mamba"} <= set(lines)
    assert list(lines["attn"].get_xdata()) == [100.0, 200.0, 400.0]  # by speed
    assert list(lines["attn"].get_ydata()) == [10.0, 20.0, 40.0]
    assert sorted(t.get_text() for t in ax.texts) == ["K 1", "K 1", "K 2", "K 2", "K 4", "K 4"]
    ref = [ln for ln in ax.get_lines() if "reference text" in ln.get_label()]
    assert len(ref) == 1 and list(ref[0].get_ydata()) == [5.0, 5.0]
    entropy = drawn.figure.axes[1]
    assert any(list(ln.get_ydata()) == [2.9, 2.9, 2.9] for ln in entropy.get_lines())


def test_the_report_shows_the_quality_figure_and_table(quality_store, cli, tmp_path):
    out = tmp_path / "r.html"
    assert cli("report", "--store", quality_store.dir, "--out", out).code == 0
    page = out.read_text()
    assert "Generative perplexity" in page and "generative perplexity against decoding" in page
    assert "ar_scorer" in page


def test_k_labels_stay_inside_their_panel(tmp_path):
    """The fastest point's label went right, past the axes' edge (K 32 at 400 tok/s was cut
    off by the frame); and the worst point's up, into the title."""
    st = Store(tmp_path / "store")
    for recipe, ppl in (("attn", [40.0, 20.0, 10.0]), ("mamba", [50.0, 22.0, 11.0])):
        rows = _cells(recipe, ppl, [400.0, 200.0, 100.0])
        for row, K in zip(rows[1:], (32, 64, 128), strict=True):
            row["K"] = K
        with st.run("eval", "fsc eval", {}) as run:
            run.add_rows("eval_cells", rows, declared()["eval_cells"])
    fig = plots.draw(st, "quality").figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    frame = ax.get_window_extent(renderer)
    assert {"K 32", "K 128"} <= {t.get_text() for t in ax.texts}
    for text in ax.texts:
        box = text.get_window_extent(renderer)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, text.get_text()
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, text.get_text()
