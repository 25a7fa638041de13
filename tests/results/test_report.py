"""`fsc report`: one self-contained HTML page (or markdown with PNGs) holding the figures, the
tables, the ratios against the baseline and each run's provenance."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from results_helpers import EVAL_COLUMNS, check_png, eval_run, full_runs, make_runs, point

from fsc.recipe import load_recipe
from fsc.results import figures
from fsc.store import Store


class Page(HTMLParser):
    """Tags, references and text of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "href", "xlink:href", "action", "data", "poster"):
                self.refs.append(value or "")
            if name == "style" and value and "url(" in value:
                self.refs.append(value)

    def handle_data(self, data):
        self.text.append(data)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def assert_self_contained(path: Path) -> Page:
    page = parse(path)
    for tag in ("script", "link", "iframe", "img", "object", "embed", "base"):
        assert tag not in page.tags, f"<{tag}> in {path.name}"
    outside = [r for r in page.refs if not (r.startswith("#") or r.startswith("data:"))]
    assert not outside, outside[:5]
    assert not re.search(r"@import|url\(\s*['\"]?(?!data:|#)", path.read_text()), "CSS reaches out"
    return page


@pytest.fixture
def full_store(tmp_path) -> tuple[Path, dict]:
    made, ids = full_runs(tmp_path / "store")
    return made.store, {"a": made.run_a, "b": made.run_b, **ids}


@pytest.mark.slow  # 5 s (every figure drawn): make test-slow
def test_html_is_one_self_contained_page_with_every_figure(cli, full_store, tmp_path):
    store, ids = full_store
    out = tmp_path / "report.html"
    r = cli("report", "all", "--store", store, "--out", out)
    assert r.code == 0, r.err
    assert r.out.strip() == str(out)
    page = assert_self_contained(out)
    assert page.tags.count("svg") == 2 * 4 + 1 + 2  # two profile runs, loss, niah + retrieval
    text = " ".join(page.text)
    for run_id in (ids["a"], ids["b"], *ids["train"], *ids["eval"]):
        assert f"Run {run_id}" in text
    assert "abc1234" in text and "fsc profile made-up a" in text
    assert "NVIDIA H100 80GB HBM3" in text and "attention:triton" in text
    # eleven inline SVGs share one page: no two elements share an id, every reference resolves
    html = out.read_text()
    element_ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(element_ids) == len(set(element_ids)) > 100
    refs = set(re.findall(r'(?:url\(#|href="#)([^")]+)', html))
    assert refs and refs <= set(element_ids)


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_ratio_table_is_against_attention_at_each_S(cli, made, tmp_path):
    out = tmp_path / "r.html"
    assert cli("report", made.run_a, "--store", made.store, "--out", out).code == 0
    html = out.read_text()
    section = html[html.index("Against tiny_attn at each S"):]
    # made-up runs: attention's step is twice Mamba's at every S and B; memory is the same
    rows = re.findall(r"<tr><td>(\d+)</td><td>(\d)</td><td>4</td><td>4</td><td>tiny_mamba</td>"
                      r"<td>([\d.]+)×</td><td>([\d.]+)×</td>", section)
    assert sorted((int(s), int(b)) for s, b, _, _ in rows) == [(1024, 1), (1024, 2), (4096, 1),
                                                               (4096, 2)]
    assert {(lat, mem) for *_, lat, mem in rows} == {("2.00", "1.00")}
    # the note as the page writes it, HTML-escaped (quote=True: ' is &#x27;)
    assert "latency ×: the baseline&#x27;s step time over the recipe&#x27;s" in section


@pytest.mark.slow  # a second report of the full store (the ratio table itself stays)
def test_baseline_option(cli, made, tmp_path):
    out = tmp_path / "r.html"
    assert cli("report", made.run_a, "--store", made.store, "--out", out,
               "--baseline", "tiny_mamba").code == 0
    assert "Against tiny_mamba at each S" in out.read_text()
    # a baseline in one profile run of the page and not in another: a note in that run's section
    st = Store(made.store)
    hybrid = load_recipe("tiny_hybrid")
    st.register_recipe("tiny_hybrid", hybrid.recipe_hash, hybrid.to_yaml(), hybrid.layer_plan)
    only_attn = st.start_run("profile", "fsc profile made-up c", None,
                             {"recipes": ["tiny_attn", "tiny_hybrid"]})
    for recipe in ("tiny_attn", "tiny_hybrid"):
        st.add_point(only_attn, point(recipe, 1024, 1, 2.0))
    st.finish_run(only_attn)
    assert cli("report", made.run_a, only_attn, "--store", made.store, "--out", out, "--force",
               "--baseline", "tiny_mamba").code == 0
    assert "tiny_mamba has no point in this run" in out.read_text()


def test_a_baseline_no_run_of_the_page_holds_is_refused(cli, made, tmp_path):
    out = tmp_path / "r.html"
    r = cli("report", made.run_a, "--store", made.store, "--out", out, "--baseline", "nope")
    assert r.code == 2 and not out.exists(), r.err
    assert r.err.strip().splitlines() == ["error: --baseline nope: no profile run of the page "
                                          "holds it (its recipes: tiny_attn, tiny_mamba)"]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_default_is_the_latest_profile_run_and_each_recipes_latest_results(cli, full_store,
                                                                           tmp_path):
    store, ids = full_store
    out = tmp_path / "r.html"
    assert cli("report", "--store", store, "--out", out).code == 0
    text = " ".join(parse(out).text)
    assert f"Run {ids['b']}" in text and f"Run {ids['a']}" not in text
    assert all(f"Run {r}" in text for r in ids["train"] + ids["eval"])


def test_text_from_the_store_is_escaped(cli, tmp_path):
    made = make_runs(tmp_path / "store")
    st = Store(made.store)
    run = st.start_run("profile", "fsc profile <script>alert(1)</script> & <b>", None, {})
    st.add_point(run, point("tiny_attn", 1024, 1, 1.0))
    st.finish_run(run)
    out = tmp_path / "r.html"
    assert cli("report", run, "--store", made.store, "--out", out).code == 0
    html = out.read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;" in html
    assert_self_contained(out)


def test_a_figure_that_cannot_be_drawn_is_named_and_the_rest_stays(cli, tmp_path):
    st = Store(tmp_path / "store")
    run = st.start_run("profile", "fsc profile", None, {})
    st.add_point(run, {k: v for k, v in point("tiny_attn", 1024, 1, 1.0).items()
                       if k in ("recipe", "recipe_hash", "layer_plan", "S", "B", "G", "K",
                                "dtype", "backend", "device")} | {"status": "oom"})
    st.finish_run(run)
    out = tmp_path / "r.html"
    assert cli("report", "--store", tmp_path / "store", "--out", out).code == 0
    html = out.read_text()
    assert html.count('class="missing"') == 4 and "no ok profile point" in html
    assert "<h3>Points</h3>" in html


@pytest.mark.slow  # every figure again, as PNG files (the HTML test draws each in make test)
def test_markdown_with_pngs_beside_it(cli, full_store, tmp_path):
    store, ids = full_store
    out = tmp_path / "notes.md"
    assert cli("report", ids["a"], *ids["eval"], "--store", store, "--out", out).code == 0
    text = out.read_text()
    links = re.findall(r"!\[(\w+)\]\(([^)]+)\)", text)
    assert [k for k, _ in links] == ["latency", "memory", "throughput", "roofline", "niah",
                                     "retrieval"]
    for _, link in links:
        assert link.startswith("notes_files/")
        check_png(tmp_path / link)
    assert "| tiny_mamba |" in text and "### Against tiny_attn at each S" in text
    assert "abc1234" in text


@pytest.mark.parametrize("args, says", [
    (["--format", "md", "--out", "x.html"], "a Markdown report is written as a .md file"),
    (["--out", "x.png"], "an HTML report is written as a .html file"),
    (["nope"], "no run 'nope'"),
    (["--format", "pdf"], "--format"),
    (["--out", "/nonexistent-dir/r.html"], "--out"),
])
def test_bad_input_is_one_line(args, says, cli, made, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("report", *args, "--store", made.store)
    assert r.code == 2 and r.err.count("\n") == 1 and says in r.err, r.err


def test_an_empty_store_is_one_line(cli, tmp_path):
    st = Store(tmp_path / "store")
    st.migrate()
    r = cli("report", "--store", tmp_path / "store", "--out", tmp_path / "r.html")
    assert r.code == 2 and "no run with results" in r.err and r.err.count("\n") == 1


# ---- in a real browser -------------------------------------------------------------------------

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str | None:
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


def open_in_browser(page: Path, shot: Path, size=(1280, 3000)) -> list[str]:
    """Load `page` in headless Chromium, screenshot it to `shot`; return the console lines."""
    res = subprocess.run(
        [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--enable-logging=stderr", "--v=0", f"--user-data-dir={shot.parent / 'profile'}",
         f"--window-size={size[0]},{size[1]}", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    assert shot.exists(), res.stderr[-2000:]
    return [line for line in res.stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.slow
@pytest.mark.skipif(_browser() is None, reason="no Chromium installed (apt-get install chromium)")
def test_the_page_loads_in_chromium_without_console_errors(cli, full_store, tmp_path):
    store, _ = full_store
    out = tmp_path / "report.html"
    assert cli("report", "all", "--store", store, "--out", out).code == 0
    console = open_in_browser(out, tmp_path / "shot.png")
    assert console == [], console
    check_png(tmp_path / "shot.png", min_size=(1280, 3000),  # the figures are on the screen
              colours=list(figures.colours(["tiny_attn", "tiny_mamba"]).values()))
    # the same check sees an error on a page that has one, and a blank page
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>x</p><script>console.error('boom');"
                   "nope();</script></body></html>")
    assert any("boom" in line for line in open_in_browser(bad, tmp_path / "bad.png"))
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    open_in_browser(blank, tmp_path / "blank.png")
    with pytest.raises(AssertionError):
        check_png(tmp_path / "blank.png")


@pytest.mark.slow  # 4-5 s: make test-slow
def test_default_report_draws_each_task_after_a_later_loss_eval(cli, tmp_path):
    """niah, then mqar, then loss: the page still draws the heatmap and the retrieval curve,
    holds the niah and mqar cells, names the runs each figure drew and how they were picked."""
    store = tmp_path / "store"
    niah, mqar = eval_run(store, "tiny_attn", "niah"), eval_run(store, "tiny_attn", "mqar")
    loss = eval_run(store, "tiny_attn", "loss")
    other = eval_run(store, "tiny_mamba", "niah")
    out = tmp_path / "r.html"
    assert cli("report", "--store", store, "--out", out).code == 0
    html = out.read_text()
    assert 'class="missing"' not in html
    assert all(f"Run {r}" in html for r in (niah, mqar, loss))
    assert html.count("<td>niah</td>") == 8 and html.count("<td>mqar</td>") == 4
    assert f"Runs: {', '.join(sorted([niah, other]))}." in html  # the heatmap's
    assert f"Runs: {', '.join(sorted([niah, mqar, other]))}." in html  # retrieval's
    assert "latest eval run of each recipe and task" in html
    older = eval_run(store, "tiny_attn", "niah")
    newer = eval_run(store, "tiny_attn", "niah")
    assert cli("report", "--store", store, "--out", out, "--force").code == 0
    html = out.read_text()
    assert f"Run {newer}" in html and f"Run {older}" not in html
    assert "The store holds 2 other runs" in html


@pytest.mark.slow  # 4 s: make test-slow
def test_numbers_read_plainly_training_is_said_once_and_config_is_a_table(cli, tmp_path):
    made, ids = full_runs(tmp_path / "store")
    st = Store(made.store)
    run = st.start_run("profile", "fsc profile", None,
                       {"recipes": ["tiny_attn"], "S": [1024], "recipe_yaml": "name: x\nd: 1\n"})
    st.add_point(run, point("tiny_attn", 1024, 1, 1068.86))
    st.finish_run(run)
    out = tmp_path / "r.html"
    assert cli("report", run, *ids["train"], "--store", made.store, "--out", out).code == 0
    html = out.read_text()
    assert not re.search(r"\d\.\d+e[+-]\d", " ".join(parse(out).text))  # no 1.07e+03
    assert "<td>1,069</td>" in html and "1,058–1,080" in html
    assert html.count(">Training<") == 1
    assert '<td>config: recipes</td><td class="text">tiny_attn</td>' in html
    assert "<details><summary>config: recipe_yaml</summary><pre>name: x\nd: 1\n</pre>" in html
    assert "figure svg { width: 100%" in html
    md = tmp_path / "r.md"
    assert cli("report", run, "--store", made.store, "--out", md).code == 0
    assert "~~~~\nname: x\nd: 1\n~~~~" in md.read_text()


def _loss_run(st: Store, recipe: str, mode: str, loss: float) -> str:
    """An eval run of one held-out loss cell, as `fsc eval --task loss` stores it."""
    with st.run("eval", f"fsc eval {recipe} --task loss", {"recipe": recipe}) as run:
        run.add_rows("eval_cells", [{"checkpoint": f"/ckpt/{recipe}", "recipe": recipe,
                                     "recipe_hash": "h", "task": "loss", "mode": mode,
                                     "G": 8 if mode == "diffusion" else 1, "K": 1,
                                     "length": 128, "n": 8, "loss": loss, "loss_se": 0.01}],
                     EVAL_COLUMNS)
        return run.run_id


def test_a_diffusion_models_loss_is_marked_as_a_bound_as_fsc_eval_marks_it(tmp_path):
    from fsc.cli.eval_render import LOSS_BOUND
    from fsc.results import report, report_render

    st = Store(tmp_path / "store")
    _loss_run(st, "quality_attn", "diffusion", 3.2412)
    _loss_run(st, "quality_scorer", "ar", 2.2731)
    page = report.build(st, report.pick(st, []))
    (table,) = [t for s in page.sections for t in s.tables if t.title == "Evaluation cells"]
    loss = {row[1]: row[table.columns.index("loss")] for row in table.rows}
    assert loss == {"quality_attn": "≤ 3.2412", "quality_scorer": "2.2731"}
    assert table.note == LOSS_BOUND
    assert "<td>≤ 3.2412</td>" in report_render.to_html(page)
    md = report_render.to_markdown(page, tmp_path, "files")
    assert "| ≤ 3.2412 |" in md and "| 2.2731 |" in md and LOSS_BOUND in md


def _harness_run(st: Store, tasks: tuple[str, ...]) -> str:
    """An eval run of `fsc eval --task harness` on one recipe: a metric row per task."""
    with st.run("eval", "fsc eval qa --task harness", {"recipe": "qa"}) as run:
        run.add_rows("eval_cells", [{"checkpoint": "/ckpt/qa", "recipe": "qa",
                                     "recipe_hash": "h", "task": "harness", "mode": "ar",
                                     "G": 1, "K": 0, "length": 0, "n": 10, "harness_task": t,
                                     "metric": "acc", "value": 0.5, "bound": False}
                                    for t in tasks], EVAL_COLUMNS)
        return run.run_id


def test_a_later_harness_run_of_other_tasks_hides_none_of_an_earlier_ones(tmp_path):
    from fsc.results import report

    st = Store(tmp_path / "store")
    mc_roll = _harness_run(st, ("my_mc", "my_roll"))
    _harness_run(st, ("my_gen",))
    gen = _harness_run(st, ("my_gen",))  # the newest my_gen replaces the one before
    assert report.pick(st, []) == [mc_roll, gen]
    assert "each harness task apart" in report.compose(st, []).note


def test_a_single_point_is_counted_in_the_singular():
    from fsc.results.report import _summary

    one = {"status": "oom", "recipe": "tiny_attn", "device": "cpu", "S": 1024, "B": 4}
    assert _summary([one]).startswith("1 point (1 oom) of tiny_attn on cpu;")
    assert _summary([one, {**one, "B": 8}]).startswith("2 points (2 oom)")


@pytest.mark.slow  # 2.8 s: make test-slow (CI runs it)
def test_a_profile_run_that_did_not_finish_says_so_in_its_summary(cli, made, tmp_path):
    """The header of an interrupted run's section says its points are not the whole sweep;
    a finished run's says nothing of the kind."""
    st = Store(made.store)
    run = st.start_run("profile", "fsc profile cut short", None, {"recipes": ["tiny_attn"]})
    st.add_point(run, point("tiny_attn", 1024, 1, 2.0))
    st.finish_run(run, "interrupted")
    for which, out in ((run, tmp_path / "cut.md"), (made.run_a, tmp_path / "whole.md")):
        assert cli("report", which, "--store", made.store, "--out", out).code == 0
    said = (f"The run did not finish (interrupted): these are the points it measured so far; "
            f"`fsc profile --resume {run}` measures the rest.")
    assert said in " ".join((tmp_path / "cut.md").read_text().split())
    assert "did not finish" not in (tmp_path / "whole.md").read_text()


def test_the_evaluation_table_says_how_a_loss_was_decoded(tmp_path, fsc_main):
    """A denoiser's loss scored --mode ar (exact, no ≤) read as if it were the bound of the
    same model: the table had no mode column."""
    from fsc.results import report

    def table(st):
        page = report.build(st, report.pick(st, []))
        (t,) = [t for s in page.sections for t in s.tables if t.title == "Evaluation cells"]
        return t

    st = Store(tmp_path / "store")
    _loss_run(st, "quality_attn", "ar", 3.2389)
    t = table(st)
    assert {row[1]: row[t.columns.index("mode")] for row in t.rows} == {"quality_attn": "ar"}
    res = fsc_main("report", "--store", tmp_path / "store", "--out", tmp_path / "r.md")
    assert res.returncode == 0 and "| mode |" in (tmp_path / "r.md").read_text()  # as written
    other = Store(tmp_path / "other")
    _loss_run(other, "quality_attn", "diffusion", 3.2412)
    assert "mode" not in table(other).columns  # one way, the bound: nothing to tell apart


def test_a_number_is_never_in_scientific_notation_nor_a_time_without_its_zone(cli, tmp_path):
    """A training run's last loss of 2.2e-08 read "2.2e-08" and its steps "36826" beside tok/s
    "41,930"; the provenance's times had microseconds and no zone, where `fsc runs` says UTC."""
    from fsc.results.report import _bits, _num

    assert [_num(v) for v in (2.2e-08, 6.62e-05, 0.0123, 12.34, 1068.86, 36826, 0.0, True)] == [
        "0.000000022", "0.0000662", "0.0123", "12.3", "1,069", "36,826", "0", "True"]
    assert _bits({"bits_per_byte": 4.56861, "mode": "ar"}) == "4.5686"  # as fsc eval prints it
    st = Store(tmp_path / "store")
    run = st.start_run("profile", "fsc profile", None, {"recipes": ["tiny_attn"]})
    st.add_point(run, point("tiny_attn", 1024, 1, 1068.86))
    st.finish_run(run)
    md = tmp_path / "r.md"
    assert cli("report", run, "--store", st.dir, "--out", md).code == 0
    text = md.read_text()
    started = re.search(r"\| started \| ([^|]*) \|", text).group(1)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", started), started
    assert re.search(r"\| ended \| \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \|", text)
