"""docs/scale.md as a user meets it: a worker that dies charges a try only to the groups begun;
a terminal's Ctrl-C reaches the driver, not the workers; the contention line counts the
processes that time points; a failed Slurm task is submitted again and says what it raised (Ctrl-C of
`fsc train --nproc 2`: tests/scale/test_train_nproc.py)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from fsc.scale import ExecutorSettings, executors, work
from fsc.store import Store


def _dies_first(cfg, group):
    """Module level (a spawned pool process imports it): group 0 kills its process, the
    others return a row."""
    if group.index == 0:
        time.sleep(0.5)
        os._exit(3)
    time.sleep(1)
    return [{"group": group.index}]


@pytest.mark.slow  # a pool of spawned processes, twice: make test-slow
def test_a_dead_worker_costs_a_try_only_to_the_groups_begun():
    workers = executors.LocalWorkers(2, retries=0, cuda=False, fn=_dies_first)
    arrivals = list(workers.arrivals(None, [work.Group(i, (i,)) for i in range(5)]))
    failed = {a.group.index for a in arrivals if a.failure is not None}
    assert 0 in failed and failed <= {0, 1}  # 1 may have been running beside 0
    rows = {a.group.index: a.rows for a in arrivals if a.failure is None}
    assert {2, 3, 4} <= set(rows) and all(rows[i] == [{"group": i}] for i in rows)
    assert len(arrivals) == 5  # each group once


def _slow_unless_first(cfg, group):
    """Module level: group 0 at once, the others after 4 s."""
    if group.index:
        time.sleep(4)
    return [{"group": group.index}]


@pytest.mark.slow  # a pool of spawned processes: make test-slow
def test_ctrl_c_of_the_process_group_leaves_the_workers_to_the_driver(capfd):
    import multiprocessing

    workers = executors.LocalWorkers(2, retries=0, cuda=False, fn=_slow_unless_first)
    arrivals = workers.arrivals(None, [work.Group(0, ()), work.Group(1, ())])
    assert next(arrivals).failure is None
    for p in multiprocessing.active_children():  # what a terminal's Ctrl-C reaches
        if p.name.startswith("SpawnProcess"):
            os.kill(p.pid, signal.SIGINT)
    second = next(arrivals)
    assert second.failure is None and second.rows == [{"group": 1}]
    assert list(arrivals) == []
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow  # one spawned worker process: make test-slow
def test_more_workers_than_points_are_not_counted_as_contention(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("fsc.scale.contention.cores", lambda: 2)
    store = tmp_path / "store"
    r = cli("profile", "-r", "tiny_mamba", "--S", "16", "--B", "1", "--repeats", "1",
            "--warmup", "0", "--workers", "4", "--store", store)
    assert r.code == 0, r.err
    assert "warning" not in r.err  # one point: one process times it, the driver waits
    (text,) = Store(store).query("select config from runs")[1][0]
    assert json.loads(text)["cpu_share"] == {"lanes": 1, "threads": 1, "cores": 2,
                                             "contended": False}


def _fails_once(flag, group, path):
    """Module level (a submitit task imports it): raises at point 2 the first time, with the
    rows of points 0 and 1 written; a flag of None always raises there."""
    with open(path, "a", encoding="utf-8") as f:
        for p in group.points:
            if p == 2 and (flag is None or not os.path.exists(flag)):
                if flag is not None:
                    Path(flag).touch()
                raise RuntimeError("no such device")
            f.write(json.dumps({"point": p}) + "\n")
            f.flush()
    return len(group.points)


@pytest.mark.slow  # submitit's local executor starts three tasks: make test-slow
def test_a_failed_slurm_task_is_submitted_again_and_says_what_it_raised(tmp_path, monkeypatch):
    pytest.importorskip("submitit")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent),
                                                      os.environ.get("PYTHONPATH", "")]))
    group = work.Group(0, (0, 1, 2, 3))

    def engine(retries: int, folder: Path):
        settings = ExecutorSettings(executor="slurm", retries=retries).check()
        found = executors.engine_for(settings, False, None, _fails_once, lambda text: None)
        found.folder = folder
        return found

    again = list(engine(1, tmp_path / "a").arrivals(str(tmp_path / "flag"), [group]))
    assert all(a.failure is None for a in again)
    assert [r["point"] for a in again for r in a.rows] == [0, 1, 2, 3]  # each once

    given_up = list(engine(0, tmp_path / "b").arrivals(None, [group]))
    (why,) = [a.failure for a in given_up if a.failure is not None]
    assert "RuntimeError: no such device" in why and "_log.err" in why
