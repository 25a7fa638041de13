"""Short causal depthwise conv of a block continuing from the cached window, then SiLU.

Grid (B, channel tiles). A program holds a [G, BLOCK_C] tile of outputs and accumulates the W
taps as shifted loads, each element taken from the block or, before it, from the window. The
new window (the last W-1 inputs) is written after a barrier, so `new_window` may be `window`.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl
from fsc.kernels import _common

from fsc.errors import KernelError


@triton.jit
def _inputs(
    x_ptr, win_ptr, b, p, p_mask, c, c_mask,
    stride_x_batch, stride_x_token, stride_x_channel,
    stride_window_batch, stride_window_channel, stride_window_tap,
    W: tl.constexpr,
):  # fmt: skip
    """Inputs at block positions `p` (negative: from the window) as an fp32 [len(p), C] tile."""
    from_x = p >= 0
    m = p_mask[:, None] & c_mask[None, :]
    xv = tl.load(
        x_ptr + b * stride_x_batch + p[:, None] * stride_x_token + c[None, :] * stride_x_channel,
        mask=m & from_x[:, None],
        other=0.0,
    )
    wv = tl.load(
        win_ptr
        + b * stride_window_batch
        + c[None, :] * stride_window_channel
        + (p + W - 1)[:, None] * stride_window_tap,
        mask=m & ~from_x[:, None],
        other=0.0,
    )
    return tl.where(from_x[:, None], xv.to(tl.float32), wv.to(tl.float32))


@triton.jit
def _conv_kernel(
    x_ptr, win_ptr, w_ptr, bias_ptr, out_ptr, nw_ptr,
    G, Cn,
    stride_x_batch, stride_x_token, stride_x_channel,
    stride_window_batch, stride_window_channel, stride_window_tap,
    stride_weight_channel, stride_weight_tap,
    stride_out_batch, stride_out_token, stride_out_channel,
    stride_new_window_batch, stride_new_window_channel, stride_new_window_tap,
    W: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_W: tl.constexpr,
    HAS_BIAS: tl.constexpr, WRITE: tl.constexpr,
):  # fmt: skip
    # int64 indices throughout: no wrap-around, and the interpreter skips its int32 overflow
    # checks (which cost more than the kernel itself)
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    c_mask = c < Cn
    t = tl.arange(0, BLOCK_G).to(tl.int64)
    t_mask = t < G

    acc = tl.zeros([BLOCK_G, BLOCK_C], tl.float32)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + c, mask=c_mask, other=0.0).to(tl.float32)[None, :]
    w_ptrs = w_ptr + c * stride_weight_channel
    for j in tl.static_range(W):
        w = tl.load(w_ptrs, mask=c_mask, other=0.0).to(tl.float32)
        w_ptrs += stride_weight_tap
        acc += w[None, :] * _inputs(
            x_ptr, win_ptr, b, t + j - (W - 1), t_mask, c, c_mask,
            stride_x_batch, stride_x_token, stride_x_channel,
            stride_window_batch, stride_window_channel, stride_window_tap,
            W,
        )  # fmt: skip
    y = acc * tl.sigmoid(acc)
    tl.store(
        out_ptr
        + b * stride_out_batch
        + t[:, None] * stride_out_token
        + c[None, :] * stride_out_channel,
        y.to(out_ptr.dtype.element_ty),
        mask=t_mask[:, None] & c_mask[None, :],
    )

    if WRITE:
        i = tl.arange(0, BLOCK_W).to(tl.int64)
        i_mask = i < W - 1
        nw = _inputs(
            x_ptr, win_ptr, b, G + i - (W - 1), i_mask, c, c_mask,
            stride_x_batch, stride_x_token, stride_x_channel,
            stride_window_batch, stride_window_channel, stride_window_tap,
            W,
        )  # fmt: skip
        tl.debug_barrier()  # every read of the old window in this program is done
        tl.store(
            nw_ptr
            + b * stride_new_window_batch
            + c[None, :] * stride_new_window_channel
            + i[:, None] * stride_new_window_tap,
            nw.to(nw_ptr.dtype.element_ty),
            mask=i_mask[:, None] & c_mask[None, :],
        )


@dataclass(frozen=True)
class Tuning(_common.Choices):
    """Launch choices (`tools.gpucheck` tries others; `_common.tuned` swaps them)."""

    block_c: int = 64  # channels a program (a power of two >= 16)
    num_warps: int | None = None  # None: 4, or 8 for a G × channel tile of >= 4096 elements


TUNING = _common.from_env("conv", Tuning())
# Alternatives `tools.gpucheck` times (changes to TUNING).
TRIALS = [{"block_c": c, "num_warps": w} for c in (32, 64, 128) for w in (4, 8)]


def causal_conv_block(x, window, weight, bias, new_window=None):
    """Triton twin of `causal_conv_block_ref` (same shapes; output in x.dtype)."""
    op = "causal_conv_block"
    dev = _common.check(
        op, {"x": x, "window": window, "weight": weight, "bias": bias, "new_window": new_window}
    )
    B, G, Cn = x.shape
    if weight.dim() != 2 or weight.shape[0] != Cn or weight.shape[1] < 1:
        raise KernelError(f"{op}: weight has shape {tuple(weight.shape)}, expected ({Cn}, W)")
    W = weight.shape[1]
    _common.expect_shape(op, "window", window, (B, Cn, W - 1))
    _common.expect_shape(op, "bias", bias, (Cn,))
    _common.expect_shape(op, "new_window", new_window, (B, Cn, W - 1))
    out = _common.empty((B, G, Cn), x.dtype, dev)
    if B == 0 or Cn == 0:
        return out
    if G == 0:
        if new_window is not None:
            new_window.copy_(window)
        return out
    write = new_window is not None and W > 1
    nw = new_window if write else out  # a placeholder pointer when nothing is written
    nw_strides = new_window.stride() if write else (0, 0, 0)
    has_bias = bias is not None
    bias = bias if has_bias else weight  # a placeholder pointer when there is no bias
    tune = TUNING
    block_c = min(_common.pow2(Cn), tune.block_c)
    with _common.device_guard(dev):
        _conv_kernel[(B, _common.cdiv(Cn, block_c))](
            x, window, weight, bias, out, nw, G, Cn,
            *x.stride(), *window.stride(), *weight.stride(), *out.stride(), *nw_strides,
            W=W, BLOCK_G=_common.pow2(G), BLOCK_C=block_c, BLOCK_W=_common.pow2(W - 1, lo=2),
            HAS_BIAS=has_bias, WRITE=write, num_warps=tune.num_warps or _common.warps(_common.pow2(G) * block_c),
        )
    return out
