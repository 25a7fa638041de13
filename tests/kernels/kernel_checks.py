"""Shared checks of the kernel tests: random inputs, dtype-aware comparison against a reference."""

from __future__ import annotations

import torch

# Max-abs error over the reference's max-abs value. fp32 is exact up to summation order; 16-bit
# outputs are rounded (the interpreter truncates bf16), about 2^-8 (bf16) and 2^-11 (fp16).
TOL = {torch.float32: 1e-5, torch.float16: 5e-3, torch.bfloat16: 2e-2}


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref|; NaN when out holds a NaN (an element never written)."""
    diff = (out.double() - ref.double()).abs().max()
    return (diff / ref.double().abs().max().clamp_min(1e-30)).item()


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str = "output"):
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    assert out.dtype == ref.dtype, f"{what}: dtype {out.dtype} != {ref.dtype}"
    bad = (~torch.isfinite(out)).sum().item()
    assert bad == 0, f"{what}: {bad} non-finite elements (never written?)"
    err = rel_err(out, ref)
    assert err <= TOL[dtype], f"{what}: relative error {err:.3g} > {TOL[dtype]:g} ({dtype})"


def randn(*shape, dtype=torch.float32, gen=None, scale=1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=gen) * scale).to(dtype)


def nan_like(t: torch.Tensor) -> torch.Tensor:
    return torch.full_like(t, float("nan"))


def dname(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def check_step(kernel, ref, args, state_at: int, dtype: torch.dtype):
    """A step (no new state): `args[state_at]`, the state, is left as it was; the output is the
    reference's."""
    before = args[state_at].clone()
    out = kernel(*args)
    assert torch.equal(args[state_at], before)
    assert_close(out, ref(*args), dtype)


def check_fold(kernel, ref, args, state_at: int, alias: bool, dtype: torch.dtype,
               state_dtype: torch.dtype):
    """A fold into the state itself (`alias`) or into a NaN-filled buffer: output and new state
    are the reference's."""
    state = args[state_at]
    want = torch.empty_like(state)
    expected = ref(*args, want)
    new = state if alias else nan_like(state)
    out = kernel(*args, new)
    assert_close(out, expected, dtype)
    assert_close(new, want, state_dtype, "new state")
