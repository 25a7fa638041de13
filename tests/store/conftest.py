"""Fixtures for the store tests: a temp store, the real `fsc` entry point (in a subprocess or in
this process), the writer script, a filled store."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fsc_run import in_process

WRITER = Path(__file__).with_name("store_writer.py")


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    """A store directory under tmp_path, also set as $FSC_STORE."""
    path = tmp_path / "store"
    monkeypatch.setenv("FSC_STORE", str(path))
    return path


@pytest.fixture
def fsc():
    """Run `fsc ARGS` in this process through the real error boundary; returns
    CompletedProcess (see tests/fsc_run.py)."""
    return in_process


@pytest.fixture
def writer():
    """Start store_writer.py (STORE N DELAY TAG) as a separate process; killed at teardown."""
    procs = []

    def start(store: Path, n: int, delay: float, tag: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(store), str(n), str(delay), tag],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def _two_runs_template(tmp_path_factory):
    from fsc.store import Store

    st = Store(tmp_path_factory.mktemp("template") / "store")
    a = st.start_run("profile", "fsc profile -r tiny", None, {"recipes": ["tiny"]})
    for s in (1024, 2048, 4096):
        st.add_point(a, {"recipe": "tiny", "S": s, "B": 2, "step_ms": s / 1000,
                         "layer_plan": ["attention", "mamba"]}, {"step": [1.0, 2.0], "fold": [3.0]})
    st.finish_run(a)
    b = st.start_run("profile", "fsc profile -r other", None, {"recipes": ["recipes/other.yaml"]})
    st.add_point(b, {"recipe": "other", "S": 64, "B": 1, "step_ms": 0.5}, {"step": [0.5]})
    st.finish_run(b, "failed", "boom")
    c = st.start_run("bench", "python -m tools.bench", None, {})
    st.add_bench(c, "decode.tokens_per_s", 412.0, "tok/s")
    st.finish_run(c)
    return st.dir, [a, b, c]


@pytest.fixture
def two_runs(store_path, _two_runs_template):
    """A store with two profile runs (finished: 3 points, each with 2 step samples and 1 fold
    sample; failed: 1 point with 1 sample) and a finished bench run with one figure;
    returns (Store, [run ids]). Built once, copied for each test."""
    from fsc.store import Store

    template, run_ids = _two_runs_template
    shutil.copytree(template, store_path)
    return Store(store_path), list(run_ids)
