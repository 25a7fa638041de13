"""`fsc profile` end to end, with real processes writing one store."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fsc_run import in_process, new_process

FSC = [sys.executable, "-m", "fsc"]
SMALL = ["--S", "16,64", "--B", "1,2", "--warmup", "0", "--repeats", "2"]


def _fsc(*args, store):
    """fsc ARGS --store STORE in this process, through its error boundary."""
    return in_process(*args, "--store", store)


def _query(store, sql):
    res = _fsc("query", sql, "--format", "json", store=store)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_profile_records_every_point(tmp_path):
    res = _fsc("profile", "-r", "tiny_attn", "-r", "tiny_mamba", *SMALL, "--json", store=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert len(doc["points"]) == 8 and all(p["status"] == "ok" for p in doc["points"])
    p = doc["points"][0]
    assert p["tokens_per_s"] == pytest.approx(p["B"] * p["G"] / ((p["K"] * p["step_ms"] + p["fold_ms"]) / 1e3))
    assert {c["recipe"] for c in doc["comparison"]} == {"tiny_mamba"}
    rows = _query(tmp_path, "select recipe, S, B, G, K, status, step_ms, step_ms_p10, step_ms_p90, "
                            "fold_ms, tokens_per_s, peak_bytes, cache_bytes, weight_bytes, git_commit, "
                            "torch_version, started_at, backend, device, dtype, recipe_hash "
                            f"from profile where run_id = '{doc['run_id']}'")
    assert len(rows) == 8
    assert all(r["step_ms_p10"] <= r["step_ms"] <= r["step_ms_p90"] for r in rows)
    assert all(r["torch_version"] and r["recipe_hash"] for r in rows)
    n = _query(tmp_path, "select count(*) as n from samples")[0]["n"]
    assert n == 8 * 2 * 2  # points × (step, fold) × repeats
    runs = json.loads(_fsc("runs", "--json", store=tmp_path).stdout)
    assert runs[0]["status"] == "finished"


def test_point_that_does_not_fit_is_an_oom_row(tmp_path):
    res = _fsc("profile", "-r", "tiny_attn", "--S", "64,100000", "--B", "1", "--warmup", "0",
               "--repeats", "1", "--memory-budget", "1MiB", "--json", store=tmp_path)
    assert res.returncode == 0, res.stderr
    status = {p["S"]: p["status"] for p in json.loads(res.stdout)["points"]}
    assert status == {64: "ok", 100000: "oom"}
    rows = _query(tmp_path, "select S, status, error from profile order by S")
    assert [r["status"] for r in rows] == ["ok", "oom"] and "but the memory budget is 1.00 MiB" in rows[1]["error"]


def test_bad_profile_arguments(tmp_path):
    for args, msg in ([("--S", "12x"), "not an integer"], [("--B", "0"), "below 1"],
                      [("-r", "nope"), "no such recipe"], [("--dtype", "int8"), "--dtype"]):
        res = _fsc("profile", *args, store=tmp_path)
        assert res.returncode == 2 and msg in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow  # make test-slow (CI) and make test-all
def test_concurrent_sweeps_and_queries_lose_nothing(tmp_path):
    procs = [subprocess.Popen([*FSC, "profile", "-r", r, *SMALL, "--store", str(tmp_path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for r in ("tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla")]
    queries = 0
    deadline = time.time() + 240
    while any(p.poll() is None for p in procs) and time.time() < deadline:
        if (tmp_path / "fsc.duckdb").exists():
            res = _fsc("query", "select count(*) from profile", store=tmp_path)
            assert res.returncode == 0, res.stderr
            queries += 1
        time.sleep(0.2)
    errs = [p.communicate(timeout=60)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    assert queries >= 1
    rows = _query(tmp_path, "select recipe, count(*) as n from profile group by recipe")
    assert {r["recipe"]: r["n"] for r in rows} == {r: 4 for r in ("tiny_attn", "tiny_mamba",
                                                                 "tiny_linear", "tiny_gla")}
    runs = _query(tmp_path, "select status from runs")
    assert [r["status"] for r in runs] == ["finished"] * 4


@pytest.mark.slow  # kill -9 of a sweep in a new process (Ctrl-C and resume stay in make test)
def test_sigkill_keeps_finished_points(tmp_path):
    proc = subprocess.Popen([*FSC, "profile", "-r", "tiny_attn", "--S",
                             ",".join(str(32 + 4 * i) for i in range(200)),  # a long sweep
                             "--B", "1", "--warmup", "0", "--repeats", "20", "--store", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, n = time.time() + 120, 0
    while time.time() < deadline and n < 3:
        time.sleep(0.5)
        if (tmp_path / "fsc.duckdb").exists():
            res = _fsc("query", "select count(*) as n from profile_points", "--format", "json",
                       store=tmp_path)
            n = json.loads(res.stdout)[0]["n"] if res.returncode == 0 else 0
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert n >= 3
    rows = _query(tmp_path, "select count(*) as n from profile where status = 'ok'")
    assert rows[0]["n"] >= n
    runs = json.loads(_fsc("runs", "--json", store=tmp_path).stdout)
    assert runs[0]["status"] != "finished"


def test_sweep_over_block_sizes_and_steps(tmp_path):
    res = _fsc("profile", "-r", "tiny_attn", "-r", "tiny_linear", "--S", "32", "--B", "1", "--G", "1,4",
               "--steps", "1,2", "--warmup", "0", "--repeats", "1", "--json", store=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    # Crossed, (G 1, K 2) is no decoding setting (a step reveals at least one position): left
    # out, and said so.
    assert sorted((p["recipe"], p["G"], p["K"]) for p in doc["points"]) == sorted(
        (r, g, k) for r in ("tiny_attn", "tiny_linear") for g in (1, 4) for k in (1, 2) if k <= g)
    assert {(c["G"], c["K"]) for c in doc["comparison"]} == {(1, 1), (4, 1), (4, 2)}
    assert "tiny_attn: (G, K) = (1, 2) left out" in res.stderr


def test_autoregressive_points(tmp_path):
    res = _fsc("profile", "-r", "tiny_attn", "--mode", "ar", "--S", "32", "--B", "2", "--warmup", "0",
               "--repeats", "2", "--json", store=tmp_path)
    assert res.returncode == 0, res.stderr
    [p] = json.loads(res.stdout)["points"]
    assert (p["G"], p["K"]) == (1, 0)
    assert p["tokens_per_s"] == pytest.approx(2 / (p["fold_ms"] / 1e3))
    res = _fsc("profile", "-r", "tiny_attn", "--mode", "ar", "--G", "4", store=tmp_path)
    assert res.returncode == 2 and "drop --G" in res.stderr


@pytest.mark.slow  # profiles in new processes: ~8 s: make test-slow (CI runs it)
def test_weights_that_do_not_fit_are_never_built(tmp_path):
    # its own process, with a time limit: building 7B-sized weights would not end soon
    res = new_process("profile", "-r", "attn_7b", "-r", "tiny_attn", "--S", "64", "--B", "1",
                      "--warmup", "0", "--repeats", "1", "--memory-budget", "1GiB", "--json",
                      "--store", tmp_path, timeout=60)
    assert res.returncode == 0, res.stderr
    status = {p["recipe"]: (p["status"], p.get("error") or "") for p in json.loads(res.stdout)["points"]}
    assert status["tiny_attn"][0] == "ok"
    assert status["attn_7b"][0] == "oom" and "weights need" in status["attn_7b"][1]
