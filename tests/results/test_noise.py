"""Noise is flagged: a point with a wide p10–p90 spread is marked in the tables and drawn
hollow in the latency figure; a ratio whose p10–p90 intervals overlap is written "noise"."""

from __future__ import annotations

import io

from results_helpers import make_runs, point
from rich.console import Console

from fsc import noise
from fsc.cli.profile_render import render_rows
from fsc.results import figures
from fsc.store import Store
from fsc.sweep_results import PointResult, compare

FIELDS = {f for f in PointResult.__dataclass_fields__} - {"samples", "traceback"}


def _result(p: dict) -> PointResult:
    return PointResult(**{k: v for k, v in p.items() if k in FIELDS} | {"mixer_backends": None})


def test_spread_noisy_and_overlap():
    quiet, loud = point("tiny_attn", 1024, 1, 2.0), point("tiny_attn", 1024, 1, 2.0, spread=0.4)
    assert abs(noise.spread(quiet) - 0.02) < 1e-12 and abs(noise.spread(loud) - 0.8) < 1e-12
    assert not noise.noisy(quiet) and noise.noisy(loud)
    assert noise.overlap(point("tiny_attn", 1, 1, 2.0, spread=0.2),
                         point("tiny_attn", 1, 1, 2.6, spread=0.2))
    assert not noise.overlap(point("tiny_attn", 1, 1, 2.0), point("tiny_attn", 1, 1, 2.6))


def test_a_ratio_inside_the_noise_is_not_claimed():
    rows = [_result(point("tiny_attn", 1024, 1, 2.0, spread=0.3)),
            _result(point("tiny_mamba", 1024, 1, 1.8, spread=0.3)),
            _result(point("tiny_attn", 4096, 1, 8.0)),
            _result(point("tiny_mamba", 4096, 1, 2.0))]
    at_1k, at_4k = compare(rows)
    assert at_1k["latency_noise"] and noise.versus(at_1k, "latency_x") == "noise"
    assert not at_4k["latency_noise"] and noise.versus(at_4k, "latency_x") == "4.00×"
    console = Console(file=io.StringIO(), width=200, markup=False)
    render_rows(rows, "r", "store", "fsc query …", console, console)
    text = console.file.getvalue()
    assert "2.000 ~" in text and "1.800 ~" in text and "8.000 ~" not in text
    assert noise.LEGEND in text and "noise" in text and "4.00×" in text


def test_throughput_is_judged_on_the_time_per_block():
    """Four steps within the noise and a fold just outside it: the block, what tokens/s
    inverts, is within the noise, so no throughput ratio is claimed; and a step change that
    four steps carry out of the noise is claimed though the fold did not move."""
    base = point("tiny_attn", 1024, 1, 1.0, spread=0.2)  # block: 5.5 ms, 4.4 to 6.6
    near = point("tiny_mamba", 1024, 1, 1.0, spread=0.2, fold_ms=1.0, fold_ms_p10=0.99,
                 fold_ms_p90=1.01, tokens_per_s=4 / 5.0 * 1e3)  # block 4.19 to 5.81
    (c,) = compare([_result(base), _result(near)])
    assert not noise.overlap(base, near, "fold") and noise.overlap(base, near, "time")
    assert c["throughput_noise"] and noise.versus(c, "throughput_x") == "noise"
    far = point("tiny_mamba", 1024, 1, 0.5, spread=0.2, fold_ms=1.5, fold_ms_p10=1.2,
                fold_ms_p90=1.8, tokens_per_s=4 / 3.5 * 1e3)  # steps 0.4 to 0.6: block 2.8 to 4.2
    (c,) = compare([_result(base), _result(far)])
    assert noise.overlap(base, far, "fold") and not noise.overlap(base, far, "time")
    assert not c["throughput_noise"] and noise.versus(c, "throughput_x") == "1.57×"


def test_the_report_marks_noisy_points_and_the_figure_draws_them_hollow(cli, tmp_path):
    made = make_runs(tmp_path / "store")
    st = Store(made.store)
    run = st.start_run("profile", "fsc profile", None, {})
    for recipe, step in (("tiny_attn", 2.0), ("tiny_mamba", 1.9)):
        st.add_point(run, point(recipe, 1024, 1, step, spread=0.4))
        st.add_point(run, point(recipe, 4096, 1, 4 * step))
    st.finish_run(run)
    out = tmp_path / "r.html"
    assert cli("report", run, "--store", made.store, "--out", out).code == 0
    html = out.read_text()
    assert "<td>2 ~</td>" in html and "<td>8</td>" in html and noise.LEGEND in html
    assert html.count("<td>noise</td>") == 2  # latency and throughput at S = 1k
    rows = [r for r in st.query(f"select * from profile where run_id = '{run}'")[1]]
    cols = st.query("select * from profile limit 0")[0]
    fig = figures.latency([dict(zip(cols, r)) for r in rows], figures.colours(
        ["tiny_attn", "tiny_mamba"]))
    hollow = [ln for ln in fig.axes[0].lines if ln.get_markerfacecolor() == "white"]
    assert sorted(x for ln in hollow for x in ln.get_xdata()) == [1024, 1024]
    assert any("noisy" in t.get_text() for t in fig.legends[0].get_texts())
