"""Whether a pytest run selects the GPU tests (`pytest -m gpu tests/gpu`), and whether it can
run them; tests/conftest.py asks when pytest is configured, before any test module imports
fsc.kernels."""

from __future__ import annotations

from _pytest.mark.expression import Expression


def selects_gpu(markexpr: str | None) -> bool:
    """Whether a -m expression selects the gpu tests, and not the unmarked ones ("gpu", "gpu and
    not slow"; not "not gpu and not slow", "slow or not slow", nor a run without -m: those run
    CPU tests, whose kernels need the interpreter)."""
    if not markexpr or not markexpr.strip():
        return False
    try:
        expr = Expression.compile(markexpr)
        return expr.evaluate(lambda name, **_: name == "gpu") and not expr.evaluate(
            lambda name, **_: False)
    except Exception:  # noqa: BLE001 - a bad expression: pytest says so itself
        return False


def refusal(markexpr: str | None, cuda: bool, interpret: str | None) -> str | None:
    """Why a run cannot run its GPU tests (one line for pytest to print), or None: it selects
    them (-m gpu) with no CUDA device, or with the Triton interpreter on (TRITON_INTERPRET=1),
    where every one of them would be skipped."""
    if not selects_gpu(markexpr):
        return None
    if not cuda:
        return "-m gpu: the gpu tests need a CUDA device, and torch sees none here"
    if interpret == "1":
        return ("-m gpu: the gpu tests compile the Triton kernels for the GPU, but the "
                "interpreter is on (TRITON_INTERPRET=1): run them without it, as `pytest -m gpu "
                "tests/gpu`")
    return None
