"""`pytest -m gpu tests/gpu` runs the GPU tests compiled for the GPU on a CUDA machine, and stops
with one line where it cannot run them (no CUDA, or TRITON_INTERPRET=1), never skipping every
one of them; every other run keeps the Triton interpreter (tests/conftest.py, tests/gpu_run.py).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_run import refusal, selects_gpu

TESTS = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("markexpr", "gpu"), [
    ("gpu", True),
    ("gpu and not slow", True),
    ("not gpu and not slow", False),  # make test
    ("slow and not gpu", False),
    ("not (gpu or slow)", False),
    ("slow or not slow", False),  # every test: the CPU ones need the interpreter
    ("", False),
])
def test_which_runs_select_the_gpu_tests(markexpr, gpu):
    assert selects_gpu(markexpr) is gpu


def test_a_gpu_run_that_cannot_run_its_tests_says_why():
    assert refusal("gpu", cuda=True, interpret="0") is None  # compiled for the GPU
    assert refusal("not gpu and not slow", cuda=False, interpret="1") is None  # make test
    assert refusal("gpu", cuda=False, interpret=None) == (
        "-m gpu: the gpu tests need a CUDA device, and torch sees none here")
    assert refusal("gpu", cuda=True, interpret="1") == (
        "-m gpu: the gpu tests compile the Triton kernels for the GPU, but the interpreter is "
        "on (TRITON_INTERPRET=1): run them without it, as `pytest -m gpu tests/gpu`")


@pytest.mark.slow  # a new interpreter imports torch for its conftest
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="needs a machine without CUDA")
def test_pytest_m_gpu_without_cuda_is_one_line():
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTEST_ADDOPTS")}
    res = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p",
                          "no:cacheprovider", str(TESTS / "gpu")], cwd=TESTS.parent, env=env,
                         capture_output=True, text=True, timeout=120)
    lines = (res.stdout + res.stderr).strip().splitlines()
    assert res.returncode == 4 and lines == [
        "ERROR: -m gpu: the gpu tests need a CUDA device, and torch sees none here"], lines
