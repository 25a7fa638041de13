"""Real processes sharing one store: concurrent writers, a concurrent reader, a SIGKILL."""

import json
import os
import signal
import time

import pytest

from fsc.store import Store

N_WRITERS = 4
N_POINTS = 30
N_SAMPLES = 12 + 4  # store_writer.py: step and fold samples per point


@pytest.mark.slow  # make test-slow (CI) and make test-all
def test_concurrent_writers_and_reader_lose_nothing(store_path, fsc, writer):
    # writers race to create and migrate the store, then interleave short transactions
    writers = [writer(store_path, N_POINTS, 0.0, f"w{i}") for i in range(N_WRITERS)]
    reads, failures = 0, []
    while any(w.poll() is None for w in writers):
        done = fsc("query", "select count(*) as n from profile_points", "--format", "json")
        if done.returncode == 0:
            reads += 1
        elif reads:  # before the first writer commits there may be no store yet
            failures.append(done.stderr)
        time.sleep(0.1)  # leave the two CPUs mostly to the writers
    outputs = [w.communicate() for w in writers]
    assert [w.returncode for w in writers] == [0] * N_WRITERS, [e for _, e in outputs]
    assert not failures
    assert reads >= 1, "the reader never got through while the writers ran"

    _, rows = Store(store_path).query(
        "select backend, count(*), count(distinct point_id) from profile_points group by 1"
        " order by 1"
    )
    assert rows == [(f"w{i}", N_POINTS, N_POINTS) for i in range(N_WRITERS)]
    _, [(n_samples, incomplete)] = Store(store_path).query(
        f"select count(*), count(*) filter (where n <> {N_SAMPLES}) from"
        " (select point_id, count(*) as n from samples group by 1)"
    )
    assert (n_samples, incomplete) == (N_WRITERS * N_POINTS, 0)
    _, statuses = Store(store_path).query("select status, count(*) from runs group by 1")
    assert statuses == [("finished", N_WRITERS)]


def test_sigkill_keeps_finished_points(store_path, fsc, writer):
    proc = writer(store_path, 1000, 0.05, "slow")
    committed = 0
    deadline = time.monotonic() + 30
    while committed < 5 and time.monotonic() < deadline:
        if proc.stdout.readline().startswith("point "):
            committed += 1
    assert committed == 5
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    # every announced point is there, whole (a point is one transaction with its samples)
    st = Store(store_path)
    _, [(points, samples)] = st.query(
        "select count(distinct p.point_id), count(s.point_id) from profile_points p"
        " left join samples s using (point_id)"
    )
    assert points >= committed
    assert samples == points * N_SAMPLES

    done = fsc("runs", "--json")
    assert done.returncode == 0, done.stderr
    [run] = json.loads(done.stdout)
    assert run["status"] == "running"
    assert run["process"] == "dead"
    assert run["points_ok"] == points

    # the store still takes writes after the kill
    run_id = st.start_run("profile", "after the kill", None, {})
    st.finish_run(run_id)
    assert len(st.runs()) == 2
