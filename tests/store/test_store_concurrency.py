"""Real processes sharing one store: concurrent writers, a concurrent reader, a SIGKILL, and
the store's lock that keeps a process from loading a checkpoint another one has overtaken."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fsc.errors import StoreError
from fsc.store import Store
from fsc.store.connect import connect
from tools import delay_lock

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


def test_a_connection_keeps_writers_out_and_a_writer_keeps_everyone_out(store_path):
    st = Store(store_path)
    st.migrate()
    with connect(st.file, read_only=False):
        for read_only in (True, False):
            with pytest.raises(StoreError, match="another fsc process is using it"):
                with connect(st.file, read_only=read_only, timeout_s=0.2):
                    pass
    with connect(st.file, read_only=True), connect(st.file, read_only=True) as con:
        assert con.execute("select count(*) from runs").fetchone() == (0,)  # readers share
        with pytest.raises(StoreError, match="another fsc process is using it"):
            with connect(st.file, read_only=False, timeout_s=0.2):
                pass
    st.finish_run(st.start_run("profile", "after", None, {}))  # let go on close


@pytest.mark.slow  # make test-slow (CI) and make test-all
@pytest.mark.skipif(not delay_lock.available(), reason="needs Linux and a C compiler")
def test_a_checkpoint_cannot_overtake_a_process_between_header_and_lock(store_path, tmp_path):
    shim = delay_lock.build(tmp_path)
    st = Store(store_path)
    run_id = st.start_run("profile", "race", None, {})
    late = subprocess.Popen(
        [sys.executable, "-c", "import sys; from fsc.store import Store;"
         " print(Store(sys.argv[1]).add_point(sys.argv[2], {'recipe': 'late'}))",
         str(store_path), run_id],
        env={**os.environ, **delay_lock.environ(shim, 2000, tell=True)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert late.stderr.readline().strip() == "about to lock"
        # the late process has read the header: this write (commit and checkpoint) must wait
        early = st.add_point(run_id, {"recipe": "early"})
        out, err = late.communicate(timeout=120)
    finally:
        late.kill()
        late.wait()
    assert late.returncode == 0, err
    _, rows = st.query("select point_id, recipe from profile_points order by recipe")
    assert rows == [(early, "early"), (int(out), "late")]


def test_a_wait_for_the_lock_is_said_once_at_a_terminal(store_path, monkeypatch):
    """At a terminal, a wait past WAIT_NOTE_S says what it waits for (once); off a terminal
    (logs, pipes) it stays silent."""
    import io

    from fsc.store import connect as connecting

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    st = Store(store_path)
    st.migrate()
    monkeypatch.setattr(connecting, "WAIT_NOTE_S", 0.05)
    for stream, said in ((Terminal(), 1), (io.StringIO(), 0)):
        monkeypatch.setattr(sys, "stderr", stream)
        with connect(st.file, read_only=False):
            with pytest.raises(StoreError, match="stayed locked"):
                with connect(st.file, read_only=True, timeout_s=0.3):
                    pass
        lines = stream.getvalue().splitlines()
        assert len(lines) == said and all("another fsc process is using it (up to 0.3 s" in ln
                                          for ln in lines), lines
