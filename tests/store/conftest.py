"""Fixtures for the store tests: a temp store, the real `fsc` entry point, the writer script."""

import subprocess
import sys
from pathlib import Path

import pytest

WRITER = Path(__file__).with_name("store_writer.py")


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    """A store directory under tmp_path, also set as $FSC_STORE."""
    path = tmp_path / "store"
    monkeypatch.setenv("FSC_STORE", str(path))
    return path


@pytest.fixture
def fsc():
    """Run `python -m fsc ARGS` (the real error boundary); returns CompletedProcess."""

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "fsc", *args],
            check=False, capture_output=True, text=True, timeout=timeout,
        )

    return run


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
