"""Pointer tiles, loads and stores the recurrent kernels (GLA, Gated DeltaNet, linear attention,
Mamba) share.

Their tensors come in two layouts: token-major `[B, T, H, C]` (inputs, outputs) and head-major
`[B, H, R, C]` (states). A program owns one batch row and one head (program ids 0 and 1) and a
tile of value columns (program id 2); indices are int64 (see _common.py). The helpers are
inlined by the compiler: a kernel compiles as if it spelled them out.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def program(BLOCK_R: tl.constexpr, BLOCK_V: tl.constexpr):
    """This program's batch row b and head h, the rows 0..BLOCK_R-1 it walks whole (keys,
    features or tokens) and its tile of BLOCK_V columns (values or head dims)."""
    b = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1).to(tl.int64)
    rows = tl.arange(0, BLOCK_R).to(tl.int64)
    cols = tl.program_id(2).to(tl.int64) * BLOCK_V + tl.arange(0, BLOCK_V)
    return b, h, rows, cols


@triton.jit
def state_tile(ptr, b, h, rows, cols, stride_batch, stride_head, stride_row, stride_col):
    """Pointers of [rows, cols] of head h, batch row b, in a head-major [B, H, R, C] tensor."""
    return (ptr + b * stride_batch + h * stride_head + rows[:, None] * stride_row
            + cols[None, :] * stride_col)


@triton.jit
def token_tile(ptr, b, h, t, cols, stride_batch, stride_token, stride_head, stride_col):
    """Pointers of [tokens t, cols] of head h, batch row b, in a token-major [B, T, H, C] tensor."""
    return (ptr + b * stride_batch + t[:, None] * stride_token + h * stride_head
            + cols[None, :] * stride_col)


@triton.jit
def load_f32(ptrs, mask):
    """A masked load, 0 outside the mask, in fp32: the kernels compute in fp32 (and the
    interpreter's 16-bit arithmetic is wrong)."""
    return tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def store(ptrs, value, mask):
    """A masked store of `value` (fp32) in the pointers' element type: the outputs' or states'
    dtype."""
    tl.store(ptrs, value.to(ptrs.dtype.element_ty), mask=mask)
