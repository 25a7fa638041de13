"""Shared checks of the kernel tests: random inputs, dtype-aware comparison against a reference."""

from __future__ import annotations

import torch

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16

# (B, G, H, Dk, Dv, dtype, state dtype): the cases every kernel with a [Dk, Dv] state per head
# (GLA, Gated DeltaNet) runs; its test adds its own.
KEY_VALUE_CASES = [
    (2, 1, 3, 16, 16, F32, F32),      # one token: the causal recurrence
    (2, 5, 2, 20, 70, F32, F32),      # Dk padded, three Dv tiles
    (1, 8, 2, 32, 16, F32, F32),
    (2, 4, 2, 16, 32, BF16, F32),
    (1, 3, 2, 16, 16, F16, F32),
    (1, 4, 2, 16, 16, F32, BF16),     # bf16 state
]

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


def key_value_id(c) -> str:
    return f"B{c[0]}G{c[1]}H{c[2]}Dk{c[3]}Dv{c[4]}-{dname(c[5])}-state_{dname(c[6])}"


# What a launch writes: nothing but the output (a step), or also the new state, into the state
# itself or into a separate buffer (a fold).
WRITES = ("step", "fold-in-place", "fold-separate")


def check_block(kernel, ref, state_at: int, args, writes: str = "fold-separate",
                dtype: torch.dtype = F32, state_dtype: torch.dtype = F32):
    """`kernel(*args)` against `ref(*args)`, `args[state_at]` the state. A step leaves the state
    as it was; a fold writes the reference's new state into the state itself or into a
    NaN-filled buffer (`writes`, one of WRITES). Tests bind the first three with
    `functools.partial`."""
    state = args[state_at]
    if writes == "step":
        before = state.clone()
        out = kernel(*args)
        assert torch.equal(state, before)
        assert_close(out, ref(*args), dtype)
        return
    want = torch.empty_like(state)
    expected = ref(*args, want)
    new = state if writes == "fold-in-place" else nan_like(state)
    out = kernel(*args, new)
    assert_close(out, expected, dtype)
    assert_close(new, want, state_dtype, "new state")
