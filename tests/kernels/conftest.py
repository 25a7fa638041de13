"""Kernel tests run the Triton kernels under the CPU interpreter. The switch is read when the
kernels are decorated, so it is set here, before anything imports fsc.kernels."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest
from fsc.kernels import _common


@pytest.fixture(autouse=True)
def poison(monkeypatch):
    """Every buffer a launcher allocates starts as NaN: an element a kernel never writes fails."""
    monkeypatch.setattr(_common, "POISON", True)
