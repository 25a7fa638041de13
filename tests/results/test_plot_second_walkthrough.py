"""`fsc plot` and `fsc report`, second walkthrough: a plain passkey run is not a RULER run in
the report either; niah, retrieval and ruler read `data` and `batch` in --where; a --where
given twice narrows by both; the runs named are those drawn; a Markdown report's figures
resolve beside a file name with a space; the report's cells name the suite's parts and their
score, its genppl rows their cuts in order; a loss run of one step and a point at S = 0 are
drawn."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt
from results_helpers import EVAL_COLUMNS, point, ruler_run, train_and_eval_rows

from fsc.recipe import load_recipe
from fsc.results import plots
from fsc.store import Store
from fsc.train.loop import TrainStep


def _out(r) -> dict:
    assert r.code == 0, r.err
    return json.loads(r.out)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _passkey_run(store: Path, recipe: str, config: dict | None = None) -> str:
    """A plain `fsc eval CKPT --task niah` run as fsc stores it: passkey cells with RULER's
    score beside the exact match."""
    st = Store(store)
    run = st.start_run("eval", f"fsc eval {recipe} --task niah", None,
                       config or {"task": "niah"})
    st.add_rows("eval_cells", run, [
        {"checkpoint": f"/ckpt/{recipe}", "recipe": recipe, "recipe_hash": "h", "task": "niah",
         "mode": "diffusion", "G": 4, "K": 4, "train_length": 128, "n": 4, "correct": 2,
         "accuracy": 0.5, "token_accuracy": 0.5, "score": 0.5, "variant": "single",
         "distractors": 0, "haystack": "filler", "length": 128 * m, "length_ratio": float(m),
         "depth": d} for m in (1, 2) for d in (0.0, 1.0)], EVAL_COLUMNS)
    st.finish_run(run)
    return run


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_plain_passkey_run_is_no_ruler_run_in_the_report_or_named(cli, tmp_path):
    store = tmp_path / "store"
    suite = ruler_run(store, "tiny_attn", lambda i, m, d: 0.5)
    passkey = _passkey_run(store, "tiny_mamba")
    r = cli("plot", "ruler", "--run", passkey, "--store", store, "--out", tmp_path / "r.png")
    assert r.code == 2 and "nothing to plot" in r.err and "plot niah and retrieval" in _flat(r.err)
    assert cli("report", "--store", store, "--out", tmp_path / "r.html").code == 0
    page = (tmp_path / "r.html").read_text()
    (caption,) = re.findall(r'<figure id="fig-ruler">.*?<figcaption>(.*?)</figcaption>', page,
                            re.S)
    assert suite in caption and passkey not in caption


def test_niah_retrieval_and_ruler_read_the_runs_data_and_batch(cli, tmp_path):
    store = tmp_path / "store"
    _passkey_run(store, "tiny_mamba", {"task": "niah", "data": "passkey",
                                       "request": {"batch": 20}})
    for kind in ("niah", "retrieval"):
        doc = _out(cli("plot", kind, "--where", "batch = 20 and data = 'passkey'", "--store",
                       store, "--out", tmp_path / f"{kind}.png", "--json"))
        assert doc["rows"] == 4
    ruler_run(store, "tiny_attn", lambda i, m, d: 0.5)
    r = cli("plot", "ruler", "--where", "batch = 20", "--store", store, "--out",
            tmp_path / "ruler.png")
    assert r.code == 2 and "leaves no row" in r.err  # the suite run has no --batch: none left


def test_a_where_given_twice_narrows_by_both(cli, made, tmp_path):
    doc = _out(cli("plot", "latency", "--where", "B = 1", "--where", "recipe = 'tiny_attn'",
                   "--store", made.store, "--out", tmp_path / "l.png", "--json"))
    assert doc["rows"] == 3  # tiny_attn at B 1: S 1024, 4096 and 131072
    r = cli("plot", "latency", "--where", "B = 1", "--where", " ", "--store", made.store,
            "--out", tmp_path / "l2.png")
    assert r.code == 2 and "--where: empty condition" in r.err


def test_the_runs_named_are_those_drawn(cli, made, tmp_path):
    r = cli("plot", "latency", "--run", made.run_a, "--run", made.run_b, "--where",
            "S = 65536", "--store", made.store, "--out", tmp_path / "l.png", "--json")
    doc = _out(r)
    assert doc["runs"] == [made.run_a] and doc["not_drawn"] == [made.run_b]
    r = cli("plot", "latency", "--run", made.run_a, "--run", made.run_b, "--where",
            "S = 65536", "--store", made.store, "--out", tmp_path / "l2.png")
    assert f"1 row of run {made.run_a}; nothing drawn of run {made.run_b}" in _flat(r.err)


def _genppl_run(st: Store, recipe: str, shuffle: bool = False, top_p: float | None = None) -> str:
    cells = [{"checkpoint": "c", "recipe": recipe, "recipe_hash": "h", "task": "genppl",
              "mode": "reference", "length": 32, "n": 4, "gen_ppl": 5.0, "entropy": 3.0,
              "scorer": "s", "prompt_length": 16}]
    cells += [{"checkpoint": "c", "recipe": recipe, "recipe_hash": "h", "task": "genppl",
               "mode": "diffusion", "G": 8, "K": K, "policy": policy, "temperature": 1.0,
               "top_p": top_p, "length": 32, "n": 4, "gen_ppl": 10.0 / K, "entropy": 2.9,
               "tokens_per_s": 800.0 / K, "scorer": "s", "prompt_length": 16}
              for policy in ("random", "confidence") for K in (4, 1, 2)]
    if shuffle:
        random.Random(3).shuffle(cells)
    with st.run("eval", f"fsc eval {recipe} --task genppl", {"data": "shakespeare"}) as run:
        run.add_rows("eval_cells", cells, EVAL_COLUMNS)
        return run.run_id


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_quality_figure_names_the_runs_it_draws(cli, tmp_path):
    st = Store(tmp_path / "store")
    qa, qm = _genppl_run(st, "qa"), _genppl_run(st, "qm")
    doc = _out(cli("plot", "quality", "--where", "recipe = 'qm'", "--store", tmp_path / "store",
                   "--out", tmp_path / "q.png", "--json"))
    assert doc["runs"] == [qm] and doc["not_drawn"] == [qa] and doc["rows"] == 7
    title = plots.draw(st, "quality", where="recipe = 'qm'").figure.get_suptitle()
    assert qm in title and qa not in title  # qa's reference row is kept, but not drawn


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_markdown_figures_resolve_beside_a_name_with_a_space(cli, made, tmp_path):
    out = tmp_path / "my notes.md"
    assert cli("report", "--store", made.store, "--out", out).code == 0
    html = MarkdownIt("commonmark").render(out.read_text())
    sources = re.findall(r'<img src="([^"]+)"', html)
    assert len(sources) == 4 and all((tmp_path / unquote(s)).is_file() for s in sources)
    # numbered in the order they come (two sections' figures were 00-… and 01-… each)
    assert [unquote(s).rsplit("/", 1)[1][:3] for s in sources] == ["01-", "02-", "03-", "04-"]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_report_names_the_suites_parts_and_genppl_cuts_in_order(cli, tmp_path):
    store = tmp_path / "store"
    ruler_run(store, "tiny_attn", lambda i, m, d: 0.25 * i)
    _genppl_run(Store(store), "qa", shuffle=True, top_p=0.9)
    out = tmp_path / "r.md"
    assert cli("report", "--store", store, "--out", out).code == 0
    text = out.read_text()
    cells = text[text.index("### Evaluation cells"):text.index("### Generative perplexity")]
    head = [c.strip() for c in cells.splitlines()[2].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in cells.splitlines()[4:] if line.startswith("|")]
    assert "score" in head
    parts = {(r[head.index("task")], r[head.index("score")]) for r in rows if r[3] == "128"}
    assert parts == {("niah", "0"), ("niah multikey", "0.25"), ("vt", "0.5"), ("cwe", "0.75")}
    genppl = text[text.index("### Generative perplexity"):].split("\n\n")[1].splitlines()
    head = [c.strip() for c in genppl[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in genppl[2:]]
    got = [(r[head.index("decoding")], r[head.index("policy")], r[head.index("K")])
           for r in rows]
    assert got == [("reference", "–", "–")] + [
        ("diffusion top-p 0.9", policy, K) for policy in ("confidence", "random")
        for K in ("1", "2", "4")]


def test_a_loss_run_of_one_step_is_a_point_on_plain_axes(tmp_path):
    st = Store(tmp_path / "store")
    run = st.start_run("train", "fsc train tiny_attn", None, {"recipe": "tiny_attn"})
    st.add_rows("train_steps", run, [
        TrainStep("tiny_attn", "h", "frontier", "copy", 1, 8.7, 1e-3, 1.0, 256, 1000.0, 0.1,
                  None).row()])
    st.finish_run(run)
    fig = plots.draw(st, "loss").figure
    fig.canvas.draw()
    ax = fig.axes[0]
    (line,) = ax.get_lines()
    assert line.get_marker() == "o"  # a line of one point alone draws nothing
    ys = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ys and not any("$" in t for t in ys), ys  # 10, not 10^1 in mathtext
    lo, hi = ax.get_xlim()
    xs = [t.get_text() for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi]
    assert xs == ["0", "1", "2"], xs  # whole steps about the one step


def test_a_point_at_S_zero_is_on_the_axis(tmp_path):
    st = Store(tmp_path / "store")
    r = load_recipe("tiny_attn")
    st.register_recipe("tiny_attn", r.recipe_hash, r.to_yaml(), r.layer_plan)
    run = st.start_run("profile", "fsc profile", None, {"recipes": ["tiny_attn"]})
    for S in (0, 1024):
        st.add_point(run, point("tiny_attn", S, 1, 1.0 + S / 1024, peak_bytes=2**20 + S))
    st.finish_run(run)
    for kind in ("latency", "memory"):
        ax = plots.draw(st, kind).figure.axes[0]
        lo, hi = ax.get_xlim()
        assert ax.get_xscale() == "symlog" and lo <= 0 < 1024 <= hi
        xs = [x for ln in ax.get_lines() for x in ln.get_xdata()]
        assert 0 in xs


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_report_takes_the_latest_profile_run_with_ok_points(cli, tmp_path):
    """An all-oom sweep after a good one hid the good one from `fsc report`: its four figures
    said "not drawn". The report now picks as `fsc plot` does; a store of oom runs alone
    still shows the latest."""

    from fsc.store import Store

    st = Store(tmp_path / "store")
    runs = []
    for status in ("ok", "oom"):
        run = st.start_run("profile", f"fsc profile ({status})", None, {})
        st.add_point(run, point("tiny_attn", 1024, 1, 1.0, status=status))
        st.finish_run(run)
        runs.append(run)
    out = tmp_path / "r.html"
    doc = json.loads(cli("report", "--store", tmp_path / "store", "--out", out, "--json").out)
    assert runs[0] in doc["runs"] and runs[1] not in doc["runs"]
    only = Store(tmp_path / "oom")
    run = only.start_run("profile", "fsc profile", None, {})
    only.add_point(run, point("tiny_attn", 1024, 1, 1.0, status="oom"))
    only.finish_run(run)
    doc = json.loads(cli("report", "--store", tmp_path / "oom", "--out", tmp_path / "o.html",
                         "--json").out)
    assert doc["runs"] == [run]


def test_the_memory_figure_draws_the_runs_memory_budget(tmp_path):
    """Points refused by a run's --memory-budget were marked × against the device's memory
    alone (23.5 GiB here), which they fit: the budget they missed is now a line of its own."""
    from fsc.store import Store

    st = Store(tmp_path / "store")
    run = st.start_run("profile", "fsc profile --memory-budget 3MiB", None,
                       {"memory_budget": 3 * 2**20})
    st.add_point(run, point("tiny_attn", 16, 1, 1.0, peak_bytes=2**20))
    st.add_point(run, point("tiny_attn", 256, 1, 1.0, status="oom", peak_bytes=None,
                            predicted_total_bytes=9 * 2**20))
    st.finish_run(run)
    drawn = plots.draw(st, "memory")
    labels = [t.get_text() for t in drawn.figure.legends[0].get_texts()]
    assert "--memory-budget 3.00 MiB" in labels
    ax = drawn.figure.axes[0]
    assert 3.0 in [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]


def test_a_roofline_of_a_given_bandwidth_says_why_it_has_no_compute_roof(tmp_path):
    """On the CPU with --bandwidth the bandwidth panel has its line and the compute panel
    none, with nothing said."""
    from fsc.store import Store

    st = Store(tmp_path / "store")
    r = load_recipe("tiny_attn")
    st.register_recipe(r.name, r.recipe_hash, r.to_yaml(), r.layer_plan)
    run = st.start_run("profile", "fsc profile --bandwidth 0.05", None, {"bandwidth": 0.05})
    st.add_point(run, point("tiny_attn", 16, 1, 1.0, device="cpu"))
    st.finish_run(run)
    labels = [t.get_text() for t in plots.draw(st, "roofline").figure.legends[0].get_texts()]
    assert any("no compute roof (no peak FLOP/s known)" in t for t in labels), labels


def test_a_run_the_where_leaves_out_is_not_said_to_be_left_undrawn(cli, tmp_path):
    """`fsc plot loss --where "recipe = 'tiny_attn'"` drew tiny_attn's run and then said
    "nothing drawn of" the other run, which the user's own --where had left out."""
    runs = train_and_eval_rows(tmp_path / "store")["train"]
    r = cli("plot", "loss", "--where", "recipe = 'tiny_attn'", "--store", tmp_path / "store",
            "--out", tmp_path / "loss.png")
    assert r.code == 0 and "nothing drawn" not in r.err and runs[1] not in r.err, r.err
    doc = _out(cli("plot", "loss", "--where", "recipe = 'tiny_attn'", "--store",
                   tmp_path / "store", "--out", tmp_path / "loss2.png", "--json"))
    assert doc["runs"] == runs[:1] and doc["not_drawn"] == []
