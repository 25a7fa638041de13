"""The Python API the profiler and the checkpoint commands call."""

import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from fsc.errors import StoreError
from fsc.store import Store
from fsc.store.process import process_state


@pytest.fixture
def st(store_path):
    return Store(store_path)


def _run(st: Store) -> str:
    env_id = st.register_environment({"fsc_version": "t", "git_commit": "abc", "git_dirty": True})
    return st.start_run("profile", "fsc profile --S 1024", env_id, {"S": [1024]})


def test_a_run_with_points_reads_back_through_the_profile_view(st):
    st.register_recipe("tiny", "h1", "name: tiny\n", ["attention", "mamba"])
    run_id = _run(st)
    t0 = time.time()
    point = {"recipe": "tiny", "recipe_hash": "h1", "layer_plan": ("attention", "mamba"),
             "S": 262144, "B": 8, "G": 32, "K": 4, "step_ms": 6.8, "tokens_per_s": 1593.0,
             "mixer_backends": {"mamba": "triton"}, "started_at": t0, "ended_at": t0 + 1}
    point_id = st.add_point(run_id, point, {"step": [7.0, 6.8, 6.9], "fold": [3.0]})
    oom_id = st.add_point(run_id, {"recipe": "tiny", "S": 1 << 20, "status": "oom",
                                   "error": "needs 90 GiB"}, None)
    st.finish_run(run_id)

    cols, rows = st.query(
        'select point_id, "S", "B", status, step_ms, mixer_backends, layer_plan, run_status,'
        " git_commit, started_at from profile order by point_id")
    first = dict(zip(cols, rows[0], strict=True))
    assert first["point_id"] == point_id and oom_id > point_id
    assert (first["S"], first["B"], first["step_ms"]) == (262144, 8, 6.8)
    assert first["mixer_backends"] == '{"mamba": "triton"}'
    assert first["layer_plan"] == ["attention", "mamba"]
    assert (first["run_status"], first["git_commit"]) == ("finished", "abc")
    assert first["started_at"] == datetime.fromtimestamp(t0, UTC).replace(tzinfo=None)
    assert rows[1][3] == "oom"
    _, samples = st.query("select phase, idx, ms from samples order by phase desc, idx")
    assert samples == [("step", 0, 7.0), ("step", 1, 6.8), ("step", 2, 6.9), ("fold", 0, 3.0)]


def test_recipes_and_environments_are_recorded_once(st):
    st.register_recipe("tiny", "h1", "name: tiny\n", ["attention"])
    st.register_recipe("tiny", "h1", "name: tiny\n", ["attention"])
    env = {"fsc_version": "t", "device_name": "cpu"}
    assert st.register_environment(env) == st.register_environment(dict(env))
    assert st.register_environment({**env, "device_name": "H200"}) != st.register_environment(env)
    assert st.query("select count(*) from recipes")[1] == [(1,)]
    assert st.query("select count(*) from environments")[1] == [(2,)]


def test_bad_arguments_raise_value_error_and_write_nothing(st):
    run_id = _run(st)
    with pytest.raises(ValueError, match="unknown point field"):
        st.add_point(run_id, {"S": 1, "latency": 3.0})
    with pytest.raises(ValueError, match="point status"):
        st.add_point(run_id, {"status": "slow"})
    with pytest.raises(ValueError, match="sample phase"):
        st.add_point(run_id, {}, {"warmup": [1.0]})
    with pytest.raises(ValueError, match="no run"):
        st.add_point("nope", {"S": 1})
    with pytest.raises(ValueError, match="run status"):
        st.finish_run(run_id, "done")
    with pytest.raises(ValueError, match="unknown environment field"):
        st.register_environment({"gpu": "x"})
    assert st.query("select count(*) from profile_points")[1] == [(0,)]


def test_finish_run_records_status_and_error(st):
    run_id = _run(st)
    st.finish_run(run_id, "interrupted", "KeyboardInterrupt")
    [run] = st.runs()
    assert (run["status"], run["error"]) == ("interrupted", "KeyboardInterrupt")
    assert run["process"] is None
    assert run["duration_s"] >= 0


def test_artifacts_registry(st):
    assert st.artifacts() == []
    aid = st.register_artifact(
        path="/ckpt", recipe_hash="h1", files_sha256={"model.safetensors": "ab"}, action="saved"
    )
    st.register_artifact(path="/ckpt", repo="me/tiny", commit_id="c0ffee", action="pushed")
    rows = st.artifacts()
    assert [r["action"] for r in rows] == ["saved", "pushed"] and rows[0]["artifact_id"] == aid
    assert rows[0]["files_sha256"] == '{"model.safetensors": "ab"}'
    with pytest.raises(ValueError, match="artifact action"):
        st.register_artifact(path="/ckpt", action="deleted")


def test_reads_never_create_a_store(st, store_path):
    with pytest.raises(StoreError, match="no store"):
        st.query("select 1")
    with pytest.raises(StoreError, match="no store"):
        st.runs()
    assert not store_path.exists()


def test_a_held_lock_gives_a_store_error_after_the_timeout(st):
    st.migrate()
    hold = (
        "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]);"
        " print('locked', flush=True); time.sleep(30)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", hold, str(st.file)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        with pytest.raises(StoreError, match="locked by another process"):
            Store(st.dir, timeout_s=0.5).start_run("profile", "cmd", None, {})
        assert 0.4 < time.monotonic() - t0 < 5
    finally:
        holder.kill()
        holder.wait()


def test_process_state():
    now = datetime.now(UTC).replace(tzinfo=None)
    host = socket.gethostname()
    assert process_state(os.getpid(), host, now) == "alive"
    assert process_state(os.getpid(), "elsewhere", now) == "unknown"
    assert process_state(None, host, now) == "unknown"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert process_state(gone.pid, host, now) == "dead"
    if os.path.exists("/proc/self/stat"):  # this process started long after a run from 2001
        assert process_state(os.getpid(), host, datetime(2001, 1, 1)) == "dead"


def test_finishing_checks_every_point_it_stored_is_there(st):
    run_id = _run(st)
    ids = [st.add_point(run_id, {"recipe": "tiny", "S": s}, None) for s in (16, 32, 64)]
    st.finish_run(run_id, points=ids)
    assert st.runs(5)[0]["status"] == "finished"
    lossy = _run(st)
    ids = [st.add_point(lossy, {"recipe": "tiny", "S": s}, None) for s in (16, 32, 64)]
    st.query(f"delete from profile_points where point_id = {ids[1]}", write=True)  # lost
    with pytest.raises(StoreError, match=rf"1 of 3 points this process stored are missing "
                                         rf"\(point ids \[{ids[1]}\]\)"):
        st.finish_run(lossy, points=ids)
    _, [(status, error)] = st.query(f"select status, error from runs where run_id = '{lossy}'")
    assert status == "failed" and str(ids[1]) in error


def test_a_sweep_that_lost_a_point_fails_loudly(cli, store_path, monkeypatch):
    add = Store.add_point

    def misplaced(self, run_id, point, samples=None):  # the id of a row that is not there
        return add(self, run_id, point, samples) + 1000

    monkeypatch.setattr(Store, "add_point", misplaced)
    r = cli("profile", "-r", "tiny_mamba", "--S", "16", "--B", "1", "--repeats", "1",
            "--warmup", "0", "--device", "cpu", "--store", store_path)
    assert r.code == 1 and r.err.strip().splitlines()[-1].startswith("error: run ")
    assert "points this process stored are missing" in r.err and "internal error" not in r.err
    assert Store(store_path).runs(1)[0]["status"] == "failed"
