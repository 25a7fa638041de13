"""Gated DeltaNet block: the delta rule with a scalar per-head decay, forward scan from the
cached state, backward scan from zero inside the block (the scan form of the GLA op).

Grid (B, H, Dv tiles). Each value column of the delta rule is independent (u_t for columns d
needs only h[:, d] and k_t), so a program keeps its [Dk, Dv_tile] slice of the state in fp32
registers and steps through the G tokens:
    h ← exp(g_t) h;  u_t = beta_t (v_t - kᵀ_t h);  h ← h + k_t u_tᵀ;  o_t = (scale q_t)ᵀ h,
forwards from the state (read once, element by element before the one write of the new state,
so new_state may be state), then backwards from zero. The forward outputs wait in an fp32
scratch shaped like the output, one [Dv_tile] row a token, rather than in a [G, Dv_tile]
register tile: any G takes the same registers and O(G) work. The backward pass adds its own
part, read after the decay and before token t's write (the later tokens' state, decayed: the
own write counts once, in the forward part), and writes each output element once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import triton
import triton.language as tl
from fsc.kernels import _common
from fsc.kernels._tiles import load_f32, program, state_tile, store


@triton.jit
def _token(q_ptrs, k_ptrs, v_ptrs, g_ptr, b_ptr, k_mask, d_mask, scale):
    """q_t·scale and k_t over the key tile, v_t over the value tile, exp(g_t) and beta_t; fp32."""
    q = load_f32(q_ptrs, k_mask) * scale
    k = load_f32(k_ptrs, k_mask)
    v = load_f32(v_ptrs, d_mask)
    a = tl.exp(tl.load(g_ptr).to(tl.float32))
    beta = tl.load(b_ptr).to(tl.float32)
    return q, k, v, a, beta


@triton.jit
def _delta_write(h, k, v, beta):
    """Write beta·(v - what h recalls for k) at key k: the delta rule (h already decayed)."""
    u = beta * (v - tl.sum(k[:, None] * h, 0))
    return h + k[:, None] * u[None, :]


@triton.jit
def _gated_delta_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, b_ptr, st_ptr, out_ptr, ns_ptr, of_ptr,
    G, DK, DV, scale,
    stride_q_batch, stride_q_token, stride_q_head, stride_q_key,
    stride_k_batch, stride_k_token, stride_k_head, stride_k_key,
    stride_v_batch, stride_v_token, stride_v_head, stride_v_value,
    stride_decay_batch, stride_decay_token, stride_decay_head,
    stride_beta_batch, stride_beta_token, stride_beta_head,
    stride_state_batch, stride_state_head, stride_state_key, stride_state_value,
    stride_out_batch, stride_out_token, stride_out_head, stride_out_value,
    stride_new_state_batch, stride_new_state_head, stride_new_state_key, stride_new_state_value,
    BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr, WRITE: tl.constexpr,
):  # fmt: skip
    b, hd, kk, d = program(BLOCK_K, BLOCK_V)
    k_mask, d_mask = kk < DK, d < DV
    kd_mask = k_mask[:, None] & d_mask[None, :]
    # Pointers at token 0, stepped by one token's stride per iteration. of_ptr (the fp32
    # scratch of the forward outputs) is shaped and strided like the output.
    q0 = q_ptr + b * stride_q_batch + hd * stride_q_head + kk * stride_q_key
    k0 = k_ptr + b * stride_k_batch + hd * stride_k_head + kk * stride_k_key
    v0 = v_ptr + b * stride_v_batch + hd * stride_v_head + d * stride_v_value
    g0 = g_ptr + b * stride_decay_batch + hd * stride_decay_head
    b0 = b_ptr + b * stride_beta_batch + hd * stride_beta_head
    o0 = out_ptr + b * stride_out_batch + hd * stride_out_head + d * stride_out_value
    f0 = of_ptr + b * stride_out_batch + hd * stride_out_head + d * stride_out_value

    h = load_f32(state_tile(st_ptr, b, hd, kk, d, stride_state_batch, stride_state_head,
                            stride_state_key, stride_state_value), kd_mask)
    qp, kp, vp, gp, bp, fp = q0, k0, v0, g0, b0, f0
    for _t in range(G):
        q, k, v, a, beta = _token(qp, kp, vp, gp, bp, k_mask, d_mask, scale)
        h = _delta_write(a * h, k, v, beta)
        tl.store(fp, tl.sum(q[:, None] * h, 0), mask=d_mask)
        qp, kp, vp = qp + stride_q_token, kp + stride_k_token, vp + stride_v_token
        gp, bp, fp = gp + stride_decay_token, bp + stride_beta_token, fp + stride_out_token
    if WRITE:
        store(state_tile(ns_ptr, b, hd, kk, d, stride_new_state_batch, stride_new_state_head,
                         stride_new_state_key, stride_new_state_value), h, kd_mask)
    tl.debug_barrier()  # the backward pass reads forward outputs other threads stored

    hb = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    last = G - 1
    qp, kp, vp = q0 + last * stride_q_token, k0 + last * stride_k_token, v0 + last * stride_v_token
    gp, bp = g0 + last * stride_decay_token, b0 + last * stride_beta_token
    fp, op = f0 + last * stride_out_token, o0 + last * stride_out_token
    for _i in range(G):
        q, k, v, a, beta = _token(qp, kp, vp, gp, bp, k_mask, d_mask, scale)
        hb = a * hb
        o = tl.load(fp, mask=d_mask, other=0.0) + tl.sum(q[:, None] * hb, 0)
        tl.store(op, o.to(out_ptr.dtype.element_ty), mask=d_mask)
        hb = _delta_write(hb, k, v, beta)
        qp, kp, vp = qp - stride_q_token, kp - stride_k_token, vp - stride_v_token
        gp, bp = gp - stride_decay_token, bp - stride_beta_token
        fp, op = fp - stride_out_token, op - stride_out_token


@dataclass(frozen=True)
class Tuning(_common.Choices):
    """Launch choices (`_common.tuned` swaps them)."""

    LEAST_BLOCK: ClassVar[int] = 1  # no tl.dot: any power-of-two width
    block_v: int | None = None  # value columns a program (a power of two); None: see block_v()
    num_warps: int | None = None  # None: 4


TUNING = _common.from_env("gated_delta", Tuning())
# Alternatives `tools.gpucheck` times (changes to TUNING).
TRIALS = [{"block_v": v, "num_warps": w} for v in (8, 16, 32, 64) for w in (1, 2, 4)]
WIDEST_TILE = 8192  # fp32 state elements a program holds at most (64 a thread at 4 warps)


def block_v(B: int, H: int, Dv: int, sms: int, Dk: int = 128) -> int:
    """Value columns a program: 32 (fewer when Dk > 256, to keep the [Dk, width] fp32 state tile
    within WIDEST_TILE), halved down to 8 while the grid would give fewer than two programs an
    SM. A program steps through the block token by token, so at small B the GPU is filled by
    more, narrower programs (one sequence of 20 heads and Dv 128 gets 8 columns: 320 programs
    on 132 SMs rather than 80)."""
    width = _common.pow2(Dv, lo=1)
    if TUNING.block_v is not None:
        return min(width, TUNING.block_v)
    widest = max(1, min(32, WIDEST_TILE // _common.pow2(Dk)))
    return _common.narrow(
        min(width, widest), min(8, widest), lambda bv: B * H * _common.cdiv(Dv, bv), sms
    )


def gated_delta_block(q, k, v, g, beta, state, scale: float, new_state=None):
    """Triton twin of `gated_delta_block_ref` (same shapes; output in q.dtype)."""
    op = "gated_delta_block"
    dev = _common.check(
        op, {"q": q, "k": k, "v": v, "g": g, "beta": beta, "state": state, "new_state": new_state}
    )
    B, G, H, Dk = q.shape
    Dv = v.shape[-1]
    _common.expect_shape(op, "k", k, (B, G, H, Dk))
    _common.expect_shape(op, "v", v, (B, G, H, Dv))
    _common.expect_shape(op, "g", g, (B, G, H))
    _common.expect_shape(op, "beta", beta, (B, G, H))
    _common.expect_shape(op, "state", state, (B, H, Dk, Dv))
    _common.expect_shape(op, "new_state", new_state, (B, H, Dk, Dv))
    out = _common.empty((B, G, H, Dv), q.dtype, dev)
    if B * H * Dv == 0:
        return out
    if G == 0:  # no tokens: the state passes through
        if new_state is not None:
            new_state.copy_(state)
        return out
    if Dk == 0:  # no keys: nothing is stored, nothing recalled
        return out.zero_()
    bv = block_v(B, H, Dv, _common.sm_count(dev), Dk)
    fwd = _common.empty(out.shape, torch.float32, dev)  # forward outputs, strided like out
    ns = new_state if new_state is not None else state
    strides = _common.strides(q, k, v, g, beta, state, out, ns)
    with _common.device_guard(dev):
        _gated_delta_kernel[(B, H, _common.cdiv(Dv, bv))](
            q, k, v, g, beta, state, out, ns, fwd, G, Dk, Dv, float(scale), *strides,
            BLOCK_K=_common.pow2(Dk), BLOCK_V=bv, WRITE=new_state is not None,
            num_warps=TUNING.num_warps or 4,
        )
    return out
