"""Sweeps that survive interruption: SIGKILL then `--resume`, and Ctrl-C's (or SIGTERM's) message."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time

import pytest

from fsc.cli.main import main
from fsc.store import Store

FSC = [sys.executable, "-m", "fsc"]
# 8 points, slow enough (hundreds of timed passes each) to stop one mid-way.
SWEEP = ["profile", "-r", "tiny_attn", "-r", "tiny_mamba", "--S", "16,32", "--B", "1,2",
         "--warmup", "0", "--repeats", "300", "--device", "cpu"]
POINT = "recipe, S, B, G, K, dtype, backend, device"


def _start(store):
    return subprocess.Popen([*FSC, *SWEEP, "--store", str(store)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _stored(store) -> int:
    if not (store / "fsc.duckdb").exists():
        return 0
    return Store(store).query("select count(*) from profile_points")[1][0][0]


def _wait_for_points(proc, store, n=1, timeout=60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        stored = _stored(store)
        if stored >= n:
            return stored
        time.sleep(0.05)
    raise AssertionError(f"no {n} point(s) stored while the sweep ran: {proc.poll()}")


def _points(store) -> list[tuple]:
    return sorted(Store(store).query(f"select {POINT} from profile_points")[1])


def _run_id(store) -> str:
    [(run_id,)] = Store(store).query("select run_id from runs")[1]
    return run_id


@pytest.mark.slow  # real processes, killed or given a new environment; make test-slow
def test_killed_sweep_resumes_to_the_uninterrupted_points(tmp_path, capsys):
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    proc, reference = _start(killed), _start(whole)
    _wait_for_points(proc, killed)
    run_id = _run_id(killed)
    assert main(["profile", "--resume", run_id, "--store", str(killed)]) == 2  # alive: refused
    assert "still running" in capsys.readouterr().err
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    before = _stored(killed)
    assert 1 <= before < 8, "the kill came too late to test resuming"

    res = subprocess.run([*FSC, "profile", "--resume", run_id, "--store", str(killed), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["run_id"] == run_id and doc["points_stored_before"] == before
    assert doc["points_measured_now"] == 8 - before
    assert len(doc["points"]) == 8  # every point the run holds, as its table shows them
    assert reference.wait(timeout=120) == 0, reference.stderr.read()

    union = _points(killed)
    assert union == _points(whole) and len(union) == len(set(union)) == 8  # no duplicates
    st = Store(killed)
    assert st.query("select run_id, status from runs")[1] == [(run_id, "finished")]
    # Every point has its own samples: none lost, none left over from the killed write.
    assert st.query("select count(*) from samples")[1][0][0] == 8 * 2 * 300
    # resuming a finished run is a no-op a retry loop reads as success
    assert main(["profile", "--resume", run_id, "--store", str(killed)]) == 0
    assert "finished; every point of it is stored" in capsys.readouterr().err
    assert st.query("select count(*) from samples")[1][0][0] == 8 * 2 * 300


@pytest.mark.slow  # real processes, killed or given a new environment; make test-slow
@pytest.mark.parametrize("stop, code", [pytest.param(signal.SIGINT, 130, id="SIGINT"),
                                        pytest.param(signal.SIGTERM, 143, id="SIGTERM")])
def test_ctrl_c_says_what_was_kept_and_how_to_continue(tmp_path, stop, code):
    proc = _start(tmp_path)
    _wait_for_points(proc, tmp_path)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    run_id = _run_id(tmp_path)
    kept = _stored(tmp_path)
    assert 1 <= kept < 8 and "Traceback" not in err
    assert f"interrupted: {kept} of 8 points of run {run_id} are stored" in err
    command = f"fsc profile --resume {run_id} --store {shlex.quote(str(tmp_path))}"
    assert command in err.splitlines()[-1]
    [(status, error)] = Store(tmp_path).query("select status, error from runs")[1]
    assert status == "interrupted" and f"{kept} of 8" in error
    assert signal.Signals(stop).name in error

    # The command it printed continues the run.
    res = subprocess.run([*FSC, *shlex.split(command)[1:]], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert len(set(_points(tmp_path))) == 8


def test_a_resumed_run_compares_every_point_it_holds(tmp_path, monkeypatch, capsys):
    """The points measured before the stop are baselines after the resume too, and resuming a
    finished run is a no-op (exit 0, nothing recorded)."""
    real = Store.add_point
    calls = []

    def stop_after_two(self, run_id, point, samples=None):
        calls.append(point["recipe"])
        got = real(self, run_id, point, samples)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return got

    sweep = ["profile", "-r", "tiny_attn", "-r", "tiny_mamba", "--S", "16", "--B", "1,2",
             "--warmup", "0", "--repeats", "2", "--device", "cpu", "--store", str(tmp_path)]
    monkeypatch.setattr(Store, "add_point", stop_after_two)
    assert main(sweep) == 143
    monkeypatch.setattr(Store, "add_point", real)
    run_id = _run_id(tmp_path)
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["profile", "--resume", run_id, "--store", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    versus = shown.split("versus tiny_attn")[1]
    rows = [ln for ln in versus.splitlines() if "tiny_mamba" in ln]
    assert len(rows) == 2 and not any(" - " in ln or "–" in ln for ln in rows), versus
    assert main(["profile", "--resume", run_id, "--store", str(tmp_path)]) == 0
    assert "nothing to do" in capsys.readouterr().err
    assert main(["profile", "--resume", run_id, "--store", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)  # a reader of stdout gets a document
    assert (doc["run_id"], doc["status"]) == (run_id, "finished")
    assert "nothing to do" in doc["nothing_to_do"]
    assert _stored(tmp_path) == 4


def test_a_resumed_run_keeps_when_it_started(tmp_path, monkeypatch):
    st = Store(tmp_path)
    run = st.start_run("profile", "fsc profile", None, {})
    st.finish_run(run, "interrupted", "stopped")
    [(began,)] = st.query(f"select started_at from runs where run_id = '{run}'")[1]
    time.sleep(0.01)
    st.resume_run(run, None)
    [(started, resumed)] = st.query(
        f"select started_at, resumed_at from runs where run_id = '{run}'")[1]
    assert started == began and resumed > began
