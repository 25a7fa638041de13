"""Kernel tests run the Triton kernels under the CPU interpreter. The switch is read when the
kernels are decorated, so it is set here, before anything imports fsc.kernels (but for a run of
the gpu tests on a CUDA machine, which compiles them: tests/conftest.py)."""

import os

if os.environ.get("FSC_GPU_TESTS") != "1":
    os.environ["TRITON_INTERPRET"] = "1"

import pytest
from fsc.kernels import _common


@pytest.fixture(autouse=True)
def poison(monkeypatch):
    """Every buffer a launcher allocates starts as NaN: an element a kernel never writes fails."""
    monkeypatch.setattr(_common, "POISON", True)
