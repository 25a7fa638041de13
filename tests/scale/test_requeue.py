"""A Slurm array task warned of its time limit (or preempted) is requeued by submitit and goes
on from the rows it wrote: no point measured twice, none lost."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from fsc.scale import executors, work


def _one_row_per_point(job, group: work.Group, path: str) -> int:
    """A stand-in for measure_to_file: a row per point, `job` seconds apart, with its pid."""
    with open(path, "a", encoding="utf-8") as f:
        for p in group.points:
            time.sleep(job or 0)
            f.write(json.dumps({"point": p, "pid": os.getpid()}) + "\n")
            f.flush()
    return len(group.points)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_task_started_again_skips_the_points_its_file_holds(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"point": 0}\n{"point": 1}\n{"point": 2, "pi')  # the last write was cut
    task = work.Requeueable(_one_row_per_point)
    group = work.Group(3, (0, 1, 2, 3))
    assert task(None, group, str(path)) == 4
    assert [r["point"] for r in _rows(path)] == [0, 1, 2, 3]
    again = task.checkpoint(None, group, str(path))  # what submitit resubmits on the signal
    assert again.function is task and again.args == (None, group, str(path))


def test_slurm_gets_a_warning_signal_before_the_time_limit():
    assert 60 <= executors.SIGNAL_DELAY_S < 600


@pytest.mark.slow  # submitit's local executor runs and requeues the task (~45 s): make test-slow
def test_a_task_warned_of_its_time_limit_is_requeued_and_goes_on(tmp_path, monkeypatch):
    """The array of SlurmArrays under submitit's local executor, which warns a task as Slurm
    does, some time before its limit (its own 30 s before the 1 minute asked for here)."""
    pytest.importorskip("submitit")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent),
                                                      os.environ.get("PYTHONPATH", "")]))
    engine = executors.SlurmArrays(tmp_path, None, 1, time_min=1, cuda=False, cluster="local",
                                   fn=_one_row_per_point)
    group = work.Group(0, tuple(range(18)))
    arrivals = list(engine.arrivals(2.0, [group]))  # 2 s a point: 36 s in all, warned at 30
    assert all(a.failure is None for a in arrivals)
    rows = [r for a in arrivals for r in a.rows]
    assert [r["point"] for r in rows] == list(range(18))  # each once, in order
    assert len({r["pid"] for r in rows}) == 2  # two processes: the task was requeued
