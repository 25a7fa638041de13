"""Gen-PPL is comparable under one scorer, on one text, at one length: the quality figure draws
a panel for each, its reference line once, and a grid's lines by colour and style with a
legend that names each value once, the policy by marker too; the speed axis names the batch
decoded at; the tables show the length and the prompt length; a --where on how cells decode
keeps the reference rows."""

import io
import itertools

import pytest

from fsc.cli.query import declared
from fsc.results import plots, report
from fsc.store import Store


def genppl_run(st: Store, recipe: str, *, scorer="ar_scorer", data="shakespeare",
               lengths=(32,), steps=(1, 2, 4), policies=("confidence",), thresholds=(None,),
               temperatures=(1.0,), prompt_length=64, samples=4, batch=None) -> str:
    """An eval run of made-up genppl cells as `fsc eval --task genppl` stores them: a reference
    row per length (Gen-PPL 5 at 32 tokens, 6 at 64...) and a cell per decoding, the Gen-PPL
    falling and the speed halving as K doubles; `batch`: the run's --batch (None: a run
    recorded without its request)."""
    cells = []
    for length in lengths:
        ref = 5.0 + length / 32 - 1
        cells.append({"checkpoint": "c", "recipe": recipe, "recipe_hash": "h", "task": "genppl",
                      "mode": "reference", "length": length, "n": samples, "gen_ppl": ref,
                      "gen_ppl_lo": ref * 0.9, "gen_ppl_hi": ref * 1.1, "entropy": 3.0,
                      "scorer": scorer, "prompt_length": prompt_length})
        for n, (K, pol, tau, T) in enumerate(itertools.product(steps, policies, thresholds,
                                                               temperatures)):
            p = ref * (1 + 8 / K) * (1 + 0.05 * (n % 5))
            cells.append({"checkpoint": "c", "recipe": recipe, "recipe_hash": "h",
                          "task": "genppl", "mode": "diffusion", "G": 8, "K": K, "policy": pol,
                          "threshold": tau, "temperature": T, "length": length,
                          "n": samples, "gen_ppl": p, "gen_ppl_lo": p * 0.9, "gen_ppl_hi": p * 1.1,
                          "entropy": 2.9, "tokens_per_s": 800.0 / K * (1.3 if tau else 1.0),
                          "scorer": scorer, "prompt_length": prompt_length})
    config = {"data": data, **({"request": {"batch": batch}} if batch is not None else {})}
    with st.run("eval", f"fsc eval {recipe} --task genppl", config) as run:
        run.add_rows("eval_cells", cells, declared()["eval_cells"])
        return run.run_id


def _panels(fig):
    """The Gen-PPL axes of a quality figure (every other row), by their titles."""
    return [ax for ax in fig.axes if ax.get_visible() and ax.get_yscale() == "log"]


def _references(ax) -> list[float]:
    return [ln.get_ydata()[0] for ln in ax.get_lines() if "reference text" in ln.get_label()]


def test_each_length_is_a_panel_of_its_own_with_its_reference(tmp_path):
    st = Store(tmp_path / "store")
    genppl_run(st, "qa", lengths=(128, 256), policies=("confidence", "entropy", "margin"))
    fig = plots.draw(st, "quality").figure
    panels = _panels(fig)
    assert [ax.get_title() for ax in panels] == ["128 tokens", "256 tokens"]
    assert [_references(ax) for ax in panels] == [[8.0], [12.0]]  # one reference line each
    for ax, length in zip(panels, (128, 256), strict=True):  # no line crosses from one length
        ref = 5.0 + length / 32 - 1
        for c in ax.containers:
            assert min(c.lines[0].get_ydata()) > ref
            assert max(c.lines[0].get_ydata()) < ref * 9 * 1.25
    labels = fig.legends[0].get_texts()
    assert sum("reference text" in t.get_text() for t in labels) == 1
    assert "under ar_scorer, shakespeare" in fig._suptitle.get_text()
    # the block size the lines decoded at, one for all, said once (eval --G 3 left no trace)
    assert "decoding speed · G 8 · " in " ".join(fig._suptitle.get_text().split())


def test_scorers_and_data_never_share_an_axis(tmp_path):
    st = Store(tmp_path / "store")
    genppl_run(st, "qa", scorer="scorer_a", data="custom.txt")
    genppl_run(st, "qs", scorer="scorer_a", data="shakespeare")
    genppl_run(st, "tl", scorer="scorer_b", data="shakespeare")
    drawn = plots.draw(st, "quality")  # the latest run of each recipe
    panels = _panels(drawn.figure)
    assert sorted(ax.get_title() for ax in panels) == [
        "under scorer_a, custom.txt", "under scorer_a, shakespeare", "under scorer_b, shakespeare"]
    for ax in panels:
        assert len({c.get_label().split(" · ")[0] for c in ax.containers}) == 1
        assert len(_references(ax)) == 1


def test_a_filter_on_decoding_keeps_the_reference(tmp_path):
    st = Store(tmp_path / "store")
    genppl_run(st, "qa", lengths=(128, 256), policies=("confidence", "margin"))
    drawn = plots.draw(st, "quality", where="policy = 'confidence' AND length = 128")
    assert {r["mode"] for r in drawn.rows} == {"diffusion", "reference"}
    (panel,) = _panels(drawn.figure)
    assert _references(panel) == [8.0]
    assert {r["policy"] for r in drawn.rows if r["mode"] == "diffusion"} == {"confidence"}
    assert plots.draw(st, "quality", where="data = 'shakespeare'").rows  # the run's --data


def test_a_policy_grid_is_told_apart_by_colour_and_style(tmp_path):
    st = Store(tmp_path / "store")
    run = genppl_run(st, "qa", steps=(2, 8), thresholds=(None, 0.9), temperatures=(0.0, 1.0),
                     policies=("confidence", "random", "margin", "entropy"))
    fig = plots.draw(st, "quality").figure
    (ax,) = _panels(fig)
    lines = [c.lines[0] for c in ax.containers]
    assert len(lines) == 16
    assert len({ln.get_color() for ln in lines}) == 4  # a colour per policy
    assert len({str(ln.get_linestyle()) for ln in lines}) == 4  # a style per τ and T
    assert len({(ln.get_color(), str(ln.get_linestyle())) for ln in lines}) == 16
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(legend) <= 14 and not any(run in t for t in legend)
    assert {"confidence", "random", "margin", "entropy", "τ 0.9 T 0"} <= set(legend)
    boxes = [t.get_window_extent() for t in ax.texts]  # the K labels never overlap
    assert all(not a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    assert {t.get_text() for t in ax.texts} == {"K 2", "K 8"}


@pytest.mark.parametrize("several", [pytest.param(False, marks=pytest.mark.slow), True])
def test_the_tables_show_the_length(several, tmp_path):
    st = Store(tmp_path / "store")
    genppl_run(st, "qa", lengths=(128, 256) if several else (128,))
    page = report.build(st, [r["run_id"] for r in report.select.runs_table(st)])
    (table,) = [t for s in page.sections for t in s.tables if t.title == "Generative perplexity"]
    assert "length" in table.columns
    lengths = [row[table.columns.index("length")] for row in table.rows]
    assert sorted(set(lengths)) == (["128", "256"] if several else ["128"])


def test_fsc_eval_genppl_table_shows_the_length_when_there_are_several(monkeypatch):
    from rich.console import Console

    from fsc.cli import eval_render
    from fsc.eval.grid import EvalCell

    def cell(length, mode="diffusion", ppl=20.0):
        return EvalCell("c", "qa", "h", mode, 8, 4, None, "genppl", length, n=4,
                        tokens_per_s=100.0, own={"gen_ppl": ppl, "policy": "confidence",
                                                 "temperature": 1.0, "scorer": "sc"})

    for lengths, shown in (((128, 256), True), ((128,), False)):
        console = Console(file=io.StringIO(), width=150)
        monkeypatch.setattr(eval_render, "out", console)
        eval_render.render([cell(n, m, p) for n in lengths
                            for m, p in (("reference", 8.0), ("diffusion", 20.0))],
                           "genppl", "qa", "r")
        text = console.file.getvalue()
        head = next(ln for ln in text.splitlines() if "decoding" in ln)
        assert ("length" in head) == shown, text
        if shown:
            assert [ln.split("│")[2].strip() for ln in text.splitlines()
                    if ln.startswith("│")] == ["128", "128", "256", "256"]


def _speed_axis(fig) -> str:
    return next(ax.get_xlabel() for ax in fig.axes if ax.get_visible() and ax.get_xlabel())


def test_the_speed_axis_names_the_batch_the_samples_were_decoded_at(tmp_path):
    st = Store(tmp_path / "store")
    genppl_run(st, "qa", samples=40, batch=20)
    assert _speed_axis(plots.draw(st, "quality").figure) == (
        "decoding speed (generated tokens/s, batch 20)")
    genppl_run(st, "qs", samples=4, batch=20)  # 4 samples: decoded 4 at once
    fig = plots.draw(st, "quality").figure
    assert "batch varies" in _speed_axis(fig)
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert {"qa · batch 20", "qs · batch 4"} <= legend


def test_a_run_recorded_without_its_batch_names_none(tmp_path):
    st = Store(tmp_path / "store")
    genppl_run(st, "qa")
    assert _speed_axis(plots.draw(st, "quality").figure) == "decoding speed (generated tokens/s)"


@pytest.mark.parametrize("thresholds", [(None,), (None, 0.9)])
def test_policies_differ_by_marker_where_each_line_is_one_point(thresholds, tmp_path):
    st = Store(tmp_path / "store")
    for recipe in ("qa", "qs"):
        genppl_run(st, recipe, steps=(8,), policies=("confidence", "random"),
                   thresholds=thresholds)
    fig = plots.draw(st, "quality").figure
    (ax,) = _panels(fig)
    markers = {c.get_label().split(" · ")[1]: set() for c in ax.containers}
    for c in ax.containers:
        markers[c.get_label().split(" · ")[1]].add(c.lines[0].get_marker())
    assert len(markers["confidence"]) == len(markers["random"]) == 1
    assert markers["confidence"] != markers["random"]
    legend = dict(zip((t.get_text() for t in fig.legends[0].get_texts()),
                      fig.legends[0].legend_handles, strict=True))
    assert {legend[p].get_marker() for p in ("confidence", "random")} == (
        markers["confidence"] | markers["random"])


def test_the_report_table_shows_the_prompt_length_and_batch(tmp_path):
    st = Store(tmp_path / "store")
    genppl_run(st, "qa", prompt_length=8, batch=20, samples=40)
    genppl_run(st, "qs", prompt_length=16)
    page = report.build(st, [r["run_id"] for r in report.select.runs_table(st)])
    (table,) = [t for s in page.sections for t in s.tables if t.title == "Generative perplexity"]
    rows = [dict(zip(table.columns, row, strict=True)) for row in table.rows]
    assert {(r["recipe"], r["prompt length"]) for r in rows} == {("qa", "8"), ("qs", "16")}
    assert {(r["recipe"], r["decoding"], r["batch"]) for r in rows} == {
        ("qa", "reference", "–"), ("qa", "diffusion", "20"), ("qs", "reference", "–"),
        ("qs", "diffusion", "–")}


def test_fsc_eval_genppl_title_names_the_prompt_length(monkeypatch):
    from rich.console import Console

    from fsc.cli import eval_render
    from fsc.eval.grid import EvalCell

    console = Console(file=io.StringIO(), width=150)
    monkeypatch.setattr(eval_render, "out", console)
    cell = EvalCell("c", "qa", "h", "diffusion", 8, 4, None, "genppl", 128, n=4,
                    tokens_per_s=100.0, own={"gen_ppl": 20.0, "scorer": "sc",
                                             "prompt_length": 16})
    eval_render.render([cell], "genppl", "qa", "r")
    assert "under sc, after 16-token prompts (run r)" in console.file.getvalue()


def test_a_scorer_below_the_working_directory_is_named_from_there(tmp_path, monkeypatch):
    """The store keeps a scorer's absolute path: docs/img/quality/quality.png's title named the
    machine's checkout (/work/…/runs/quality/quality_scorer/step-001200)."""
    monkeypatch.chdir(tmp_path)
    st = Store(tmp_path / "store")
    genppl_run(st, "qa", scorer=f"ar_scorer ({tmp_path / 'runs' / 'sc' / 'step-000010'})")
    title = plots.draw(st, "quality").figure._suptitle.get_text()
    assert "under ar_scorer (runs/sc/step-000010), shakespeare" in title
    assert str(tmp_path) not in title
    genppl_run(st, "qa", scorer=str(tmp_path / "runs" / "sc" / "step-000010"))  # a path alone
    title = plots.draw(st, "quality").figure._suptitle.get_text()
    assert "under runs/sc/step-000010, shakespeare" in title and str(tmp_path) not in title
    other = Store(tmp_path / "other")
    genppl_run(other, "qb", scorer="/elsewhere/scorer")  # not below it: as kept
    assert "under /elsewhere/scorer, shakespeare" in \
        plots.draw(other, "quality").figure._suptitle.get_text()
