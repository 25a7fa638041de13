"""`fsc compare RUN_A RUN_B`: points matched on their key, ratios B / A, noise told from change
by the p10–p90 intervals, the geometric mean, and --fail-above as a CI gate."""

from __future__ import annotations

import json
import math
import os

import pytest
from results_helpers import make_runs, point

from fsc.recipe import load_recipe
from fsc.results import compare as comparing
from fsc.store import Store


def _json(cli, *args):
    r = cli("compare", *args, "--json")
    return r, json.loads(r.out) if r.out.strip() else None


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_ratios_geomean_and_unmatched_points(cli, tmp_path):
    made = make_runs(tmp_path / "store", slow=1.10)
    r, doc = _json(cli, made.run_a, made.run_b, "--store", made.store)
    assert r.code == 0, r.err
    assert doc["run_a"] == made.run_a and doc["key"] == list(comparing.KEY)
    assert len(doc["points"]) == 8 and len(doc["only_a"]) == 1 and len(doc["only_b"]) == 1
    assert doc["only_a"][0]["S"] == 65536 and doc["only_b"][0]["S"] == 131072
    for p in doc["points"]:
        assert p["step_ratio"] == pytest.approx(1.10) and p["fold_ratio"] == pytest.approx(1.10)
        assert p["time_ratio"] == pytest.approx(1.10)
        assert p["tokens_per_s_ratio"] == pytest.approx(1 / 1.10)
        assert p["peak_bytes_ratio"] == pytest.approx(1.0)
        assert p["step_overlap"] is False and p["verdict"] == "slower"  # ±1 % vs 10 % apart
    assert doc["geomean"]["time"] == pytest.approx(1.10)
    assert doc["failed"] == [] and doc["fail_above"] is None


def test_the_geometric_mean_is_of_the_ratios(tmp_path):
    a = [point("tiny_attn", S, 1, 1.0) for S in (1024, 2048)]
    b = [point("tiny_attn", 1024, 1, 2.0), point("tiny_attn", 2048, 1, 0.5)]
    c = comparing.compare("a", a, "b", b)
    assert [p.ratios["step"] for p in c.pairs] == [2.0, 0.5]
    assert c.geomean["step"] == pytest.approx(1.0)
    assert {p.verdict for p in c.pairs} == {"slower", "faster"}


def test_overlapping_intervals_are_noise():
    a = [point("tiny_attn", 1024, 1, 1.00, spread=0.05)]
    b = [point("tiny_attn", 1024, 1, 1.03, spread=0.05)]  # 3 % apart, ±5 % each
    (pair,) = comparing.compare("a", a, "b", b).pairs
    assert pair.overlap == {"step": True, "fold": True, "time": True}
    assert pair.verdict == "noise" and pair.ratios["step"] == pytest.approx(1.03)


def test_the_verdict_follows_the_block_time_it_names():
    """Four noisy but slower steps and a faster fold: the block is slower, not 'faster'."""
    a = point("tiny_hybrid", 1024, 4, 1.00, spread=0.30)
    b = point("tiny_hybrid", 1024, 4, 1.42, spread=0.30)
    fold_b = 0.5 * a["fold_ms"]  # the fold alone got faster, well outside the noise
    b |= {"fold_ms": fold_b, "fold_ms_p10": fold_b * 0.99, "fold_ms_p90": fold_b * 1.01,
          "tokens_per_s": 16 / (4 * 1.42 + fold_b) * 1e3}
    (pair,) = comparing.compare("a", [a], "b", [b]).pairs
    assert pair.overlap["step"] and pair.overlap["fold"] is False
    assert pair.ratios["time"] > 1 and pair.verdict != "faster"
    far = point("tiny_hybrid", 1024, 4, 3.0, spread=0.01)  # the whole block slower: said so
    (pair,) = comparing.compare("a", [a], "b", [far]).pairs
    assert pair.overlap["time"] is False and pair.verdict == "slower"


def test_points_differing_in_any_key_field_do_not_match():
    base = point("tiny_attn", 1024, 1, 1.0)
    for field, other in (("dtype", "fp32"), ("backend", "torch"), ("device", "cuda:1"),
                         ("G", 8), ("K", 2), ("recipe_hash", "other"), ("B", 2)):
        c = comparing.compare("a", [base], "b", [base | {field: other}])
        assert not c.pairs and len(c.only_a) == len(c.only_b) == 1, field


@pytest.mark.parametrize("limit, code", [("1.05", 1), ("1.2", 0), ("1.1000001", 0)])
def test_fail_above_gates_on_the_geometric_mean(limit, code, cli, tmp_path):
    made = make_runs(tmp_path / "store", slow=1.10)
    r = cli("compare", made.run_a, made.run_b, "--store", made.store, "--fail-above", limit)
    assert r.code == code, r.err
    if code:
        assert r.err.count("\n") == 1 and "1.100× A's time per block" in r.err
        assert "geometric mean" in r.out  # the table is still shown before the verdict
    else:
        assert r.err == ""


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_faster_b_passes_and_a_run_against_itself_is_one(cli, tmp_path):
    made = make_runs(tmp_path / "store", slow=0.8)
    assert cli("compare", made.run_a, made.run_b, "--store", made.store,
               "--fail-above", "1.0").code == 0
    r, doc = _json(cli, made.run_a, made.run_a, "--store", made.store, "--fail-above", "1.0")
    assert r.code == 0 and doc["geomean"]["time"] == 1.0
    assert {p["verdict"] for p in doc["points"]} == {"noise"}


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_point_lost_in_b_fails_the_gate(cli, tmp_path):
    made = make_runs(tmp_path / "store", slow=1.0)
    st = Store(made.store)
    run = st.start_run("profile", "fsc profile c", None, {})
    r = load_recipe("tiny_attn")
    for S in (1024, 4096):
        st.add_point(run, point("tiny_attn", S, 1, 2.0 * S / 1024))
    st.add_point(run, {k: v for k, v in point("tiny_attn", 1024, 2, 1.0).items()
                       if k in ("recipe", "recipe_hash", "layer_plan", "S", "B", "G", "K",
                                "dtype", "backend", "device")} | {"status": "oom"})
    st.finish_run(run)
    res, doc = _json(cli, made.run_a, run, "--store", made.store, "--fail-above", "1.5")
    assert res.code == 1 and "ok in A are oom in B" in res.err and r.name == "tiny_attn"
    lost = [p for p in doc["points"] if p["status_b"] == "oom"]
    assert len(lost) == 1 and lost[0]["verdict"] == "status" and lost[0]["time_ratio"] is None
    assert doc["geomean"]["time"] == pytest.approx(1.0)


def test_a_real_sweep_against_itself(cli, real_profile):
    store, run_id = real_profile
    r, doc = _json(cli, run_id, run_id, "--store", store)
    assert r.code == 0 and len(doc["points"]) == 8
    assert all(math.isclose(p["step_ratio"], 1.0) for p in doc["points"])
    table = cli("compare", run_id, run_id, "--store", store)
    assert table.code == 0 and "8 points matched (8 noise)" in table.out


@pytest.mark.parametrize("args, says", [
    (["nope", "{b}"], "RUN_A: no profile run 'nope'"),
    (["{a}", "nope"], "RUN_B: no profile run 'nope'"),
    (["{a}", "{b}", "--fail-above", "nan"], "--fail-above"),
    (["{a}", "{b}", "--fail-above", "0"], "--fail-above"),
    (["{a}"], "RUN_B"),
])
def test_bad_input_is_one_line(args, says, cli, made):
    args = [a.format(a=made.run_a, b=made.run_b) for a in args]
    r = cli("compare", *args, "--store", made.store)
    assert r.code == 2 and r.err.count("\n") == 1 and says in r.err, r.err


def test_runs_of_other_kinds_or_with_nothing_shared_are_refused(cli, made):
    st = Store(made.store)
    train = st.start_run("train", "fsc train", None, {})
    r = cli("compare", made.run_a, train, "--store", made.store)
    assert r.code == 2 and "is a train run" in r.err
    empty = st.start_run("profile", "fsc profile", None, {})
    r = cli("compare", made.run_a, empty, "--store", made.store)
    assert r.code == 2 and "share no point" in r.err


def _at_width(monkeypatch, width: int) -> None:
    from fsc.cli import common

    monkeypatch.setattr(common.out, "width", width)


def test_the_table_reads_at_100_columns_and_whole_with_wide(cli, tmp_path, monkeypatch):
    """Constant G, K and dtype go to the title; columns go until the rest fits; no ratio or
    header is cut, no line is wider than the terminal."""
    made = make_runs(tmp_path / "store", slow=1.10)
    _at_width(monkeypatch, 100)
    r = cli("compare", made.run_a, made.run_b, "--store", made.store)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "…" not in r.out
    assert "G 4 · K 4 · dtype bf16" in r.out
    for head in ("recipe", "step ×", "time ×", "verdict"):
        assert head in r.out
    assert r.out.count("1.100×") >= 2 * 8 and r.out.count("slower") == 9  # and the summary
    _at_width(monkeypatch, 100)
    wide = cli("compare", made.run_a, made.run_b, "--store", made.store, "--wide")
    assert "fold ×" not in r.out and "fold ×" in wide.out  # the first to go
    assert max(len(line) for line in wide.out.splitlines()) > 100


@pytest.mark.slow  # its runs, 1.4 s: make test-slow
def test_the_title_breaks_only_between_its_pieces_at_80_columns(cli, tmp_path, monkeypatch):
    """At 80 columns the title wrapped as `… · G` / `4 · K 4 · dtype bf16`: each NAME VALUE
    piece said in it stays on one line, with a plain space, in the table only."""
    made = make_runs(tmp_path / "store", slow=1.10)
    _at_width(monkeypatch, 80)
    r = cli("compare", made.run_a, made.run_b, "--store", made.store)
    assert r.code == 0, r.err
    title = r.out.split("┏")[0].splitlines()
    assert len(title) == 2, title  # it wraps
    for piece in ("G 4", "K 4", "dtype bf16"):
        assert any(piece in line for line in title), title
    doc = cli("compare", made.run_a, made.run_b, "--store", made.store, "--json").out
    assert "\xa0" not in r.out + doc


def _profile_runs(folder, made: list[tuple[dict, float]]) -> list[str]:
    """A finished profile run of tiny_attn per (config, step ms), one point each, in a store
    at `folder`."""
    from results_helpers import _env

    st = Store(folder)
    r = load_recipe("tiny_attn")
    st.register_recipe("tiny_attn", r.recipe_hash, r.to_yaml(), r.layer_plan)
    env = _env(st)
    runs = []
    for config, step in made:
        run = st.start_run("profile", "fsc profile", env, {"recipes": ["tiny_attn"], **config})
        st.add_point(run, point("tiny_attn", 1024, 1, step))
        st.finish_run(run)
        runs.append(run)
    return runs


def test_runs_timed_differently_on_the_gpu_are_said_to_be(cli, tmp_path):
    runs = _profile_runs(tmp_path / "store", [({}, 30.0), ({"graphs": True}, 4.0)])  # eager; graphs
    r, doc = _json(cli, *runs, "--store", tmp_path / "store")
    assert r.code == 0, r.err
    assert doc["timing"] == {"a": "eager", "b": "graphs"}
    assert (f"note: A ({runs[0]}) timed its steps issued eagerly (--no-graphs), B ({runs[1]}) "
            "replayed from CUDA graphs" in r.err)
    r, doc = _json(cli, runs[1], runs[1], "--store", tmp_path / "store")
    assert doc["timing"] == {"a": "graphs", "b": "graphs"} and "note:" not in r.err
    on_cpu = [point("tiny_attn", 16, 1, 1.0, device="cpu")]
    assert comparing.timing({}, on_cpu) == "cpu"
    assert comparing.timing_note("a", "cpu", "b", "graphs") is None


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_runs_timed_over_different_repeats_are_said_to_be(cli, tmp_path):
    runs = _profile_runs(tmp_path / "store", [({"repeats": n}, 4.0) for n in (5, 40, 40)])
    r, doc = _json(cli, runs[0], runs[1], "--store", tmp_path / "store")
    note = (f"note: A ({runs[0]}) timed each point over 5 repeats, B ({runs[1]}) over 40: the "
            "medians and p10–p90 intervals (and so the verdicts) rest on different numbers of "
            "samples")
    assert r.code == 0 and note in r.err, r.err
    assert doc["repeats"] == {"a": 5, "b": 40} and doc["notes"] == [note]
    r, doc = _json(cli, runs[1], runs[2], "--store", tmp_path / "store")
    assert "note:" not in r.err and doc["notes"] == [] and doc["repeats"] == {"a": 40, "b": 40}


def test_a_run_timed_once_a_point_is_said_to_give_no_verdict_of_noise():
    """With --repeats 1 the p10–p90 interval has no width: every difference was called faster
    or slower without a word (2.48× "faster", from a first call's overhead)."""
    said = comparing.repeats_note("a", 1, "b", 1)
    assert said == ("note: A (a) and B (b) timed each point once (--repeats 1): a p10–p90 "
                    "interval of no width, so no difference reads as noise and every verdict "
                    "is faster or slower; time them with --repeats 3 or more before concluding")
    assert comparing.repeats_note("a", 5, "b", 1).startswith("note: B (b) timed each point once")
    assert comparing.repeats_note("a", 5, "b", 5) is None


def test_fsc_compare_says_a_run_timed_once_a_point(cli, tmp_path):
    runs = _profile_runs(tmp_path / "store", [({"repeats": 5}, 4.0), ({"repeats": 1}, 4.0)])
    r, doc = _json(cli, *runs, "--store", tmp_path / "store")
    said = f"note: B ({runs[1]}) timed each point once (--repeats 1)"
    assert r.code == 0 and said in r.err and doc["notes"][0].startswith(said)


def test_runs_fitted_to_different_memory_budgets_are_said_to_be(cli, tmp_path):
    """A point out of memory under one --memory-budget and not another is the budget's doing:
    compare says the budgets differ, as it says the repeats do."""
    runs = _profile_runs(tmp_path / "store", [({"memory_budget": 3 << 20}, 4.0),
                                               ({"memory_budget": 2 << 20}, 4.0), ({}, 4.0)])
    r, doc = _json(cli, runs[0], runs[1], "--store", tmp_path / "store")
    note = (f"note: A ({runs[0]}) fitted its points to --memory-budget 3.00 MiB, B ({runs[1]}) "
            "to --memory-budget 2.00 MiB: a point out of memory in one run and not the other "
            "may be the budget, not the run")
    assert r.code == 0 and note in r.err, r.err
    assert doc["memory_budget"] == {"a": 3 << 20, "b": 2 << 20} and doc["notes"] == [note]
    r, doc = _json(cli, runs[1], runs[2], "--store", tmp_path / "store")
    assert "to the device's free memory" in r.err and doc["memory_budget"]["b"] is None
    r, doc = _json(cli, runs[0], runs[0], "--store", tmp_path / "store")
    assert doc["notes"] == []


def test_eval_runs_are_pointed_to_report_and_query(cli, made):
    """`fsc compare` of eval runs (by a prefix of the tail, or a whole id): one line saying
    it compares profile runs, and what sets eval runs side by side."""
    st = Store(made.store)
    evals = [st.start_run("eval", "fsc eval", None, {}) for _ in range(2)]
    for args, which in (([evals[0].rpartition("-")[2], evals[1]], "RUN_A"),
                        ([made.run_a, evals[1]], "RUN_B")):
        r = cli("compare", *args, "--store", made.store)
        run = evals[0] if which == "RUN_A" else evals[1]
        assert r.code == 2 and r.err.count("\n") == 1, r.err
        assert r.err.startswith(f"error: {which}: run {run} is an eval run; fsc compare "
                                "compares profile runs point by point (set eval runs side by "
                                "side with fsc report RUN RUN ...; its rows: fsc query "
                                f"\"SELECT * FROM evaluation WHERE run_id = '{run}'\")"), r.err


def test_a_run_that_did_not_finish_is_said_to_be(cli, tmp_path):
    """`fsc compare … latest` may pick a profile run stopped half way: the points it lacks show
    only as A's alone, so compare says the run did not finish, as the report's header does."""
    runs = _profile_runs(tmp_path / "store", [({}, 4.0), ({}, 4.0)])
    Store(tmp_path / "store").finish_run(runs[1], "interrupted")
    r, doc = _json(cli, runs[0], "latest", "--store", tmp_path / "store")
    note = (f"note: B ({runs[1]}) did not finish (interrupted): it is compared on the points it "
            f"measured so far; `fsc profile --resume {runs[1]}` measures the rest")
    assert r.code == 0 and note in r.err, r.err
    assert doc["status"] == {"a": "finished", "b": "interrupted"} and doc["notes"] == [note]
    r, doc = _json(cli, runs[1], runs[1], "--store", tmp_path / "store")
    assert r.err.count("did not finish") == 1 and len(doc["notes"]) == 1
    r, doc = _json(cli, runs[0], runs[0], "--store", tmp_path / "store")
    assert doc["notes"] == [] and "note:" not in r.err


def test_a_killed_run_is_said_dead_not_running(cli, tmp_path):
    """A run killed with -9 stays marked running; `fsc runs` shows it dead, and compare said
    it was running and that the rest would be measured "once it has stopped"."""
    import subprocess
    import sys

    runs = _profile_runs(tmp_path / "store", [({}, 4.0), ({}, 4.0)])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    st = Store(tmp_path / "store")
    st.query(f"update runs set status = 'running', ended_at = null, pid = {gone.pid} "
             f"where run_id = '{runs[1]}'", write=True)
    _, doc = _json(cli, runs[0], runs[1], "--store", tmp_path / "store")
    assert doc["status"]["b"] == "dead" and doc["notes"] == [
        f"note: B ({runs[1]}) did not finish (dead): it is compared on the points it measured "
        f"so far; `fsc profile --resume {runs[1]}` measures the rest"]
    st.query(f"update runs set pid = {os.getpid()} where run_id = '{runs[1]}'", write=True)
    _, doc = _json(cli, runs[0], runs[1], "--store", tmp_path / "store")  # alive: running
    assert doc["status"]["b"] == "running" and doc["notes"][0].endswith(" once it has stopped")
