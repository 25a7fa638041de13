"""GLA block: per-key-dimension forget gate, forward scan from the state, backward in the block.

Grid (B, H, Dv tiles). A program keeps its [Dk, Dv_tile] slice of the state in fp32 registers
and steps through the G tokens twice: forward from the cached state (writing the new state at
the end, element by element from the old one, so new_state may be state), then backward from
zero, where token t sees exp(g_t) ⊙ h'_{t+1} — the diagonal q_t·k_t v_t is counted once, by
the forward pass. The G outputs of the tile are gathered in registers and stored once.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl
from fsc.kernels import _common as C


@triton.jit
def _token(q_ptrs, k_ptrs, g_ptrs, v_ptrs, k_mask, d_mask, scale):
    """q_t·scale, k_t, exp(g_t) over the key tile and v_t over the value tile, in fp32."""
    q = tl.load(q_ptrs, mask=k_mask, other=0.0).to(tl.float32) * scale
    k = tl.load(k_ptrs, mask=k_mask, other=0.0).to(tl.float32)
    a = tl.exp(tl.load(g_ptrs, mask=k_mask, other=0.0).to(tl.float32))
    v = tl.load(v_ptrs, mask=d_mask, other=0.0).to(tl.float32)
    return q, k, a, v


@triton.jit
def _gla_kernel(q_ptr, k_ptr, v_ptr, g_ptr, st_ptr, out_ptr, ns_ptr, G, DK, DV, scale,
                sqb, sqg, sqh, sqk, skb, skg, skh, skk, svb, svg, svh, svd,
                sgb, sgg, sgh, sgk, ssb, ssh, ssk, ssd, sob, sog, soh, sod,
                snb, snh, snk, snd,
                BLOCK_G: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr,
                WRITE: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    hd = tl.program_id(1).to(tl.int64)
    kk = tl.arange(0, BLOCK_K).to(tl.int64)  # int64 indices: see _common.py
    d = tl.program_id(2).to(tl.int64) * BLOCK_V + tl.arange(0, BLOCK_V)
    k_mask, d_mask = kk < DK, d < DV
    kd_mask = k_mask[:, None] & d_mask[None, :]
    rows = tl.arange(0, BLOCK_G)
    # Pointers at token 0, stepped by one token's stride per iteration.
    q0 = q_ptr + b * sqb + hd * sqh + kk * sqk
    k0 = k_ptr + b * skb + hd * skh + kk * skk
    g0 = g_ptr + b * sgb + hd * sgh + kk * sgk
    v0 = v_ptr + b * svb + hd * svh + d * svd

    h = tl.load(st_ptr + b * ssb + hd * ssh + kk[:, None] * ssk + d[None, :] * ssd,
                mask=kd_mask, other=0.0).to(tl.float32)
    o = tl.zeros([BLOCK_G, BLOCK_V], tl.float32)
    qp, kp, gp, vp = q0, k0, g0, v0
    for t in range(G):
        q, k, a, v = _token(qp, kp, gp, vp, k_mask, d_mask, scale)
        h = a[:, None] * h + k[:, None] * v[None, :]
        o = tl.where(rows[:, None] == t, tl.sum(q[:, None] * h, 0)[None, :], o)
        qp, kp, gp, vp = qp + sqg, kp + skg, gp + sgg, vp + svg
    if WRITE:
        tl.store(ns_ptr + b * snb + hd * snh + kk[:, None] * snk + d[None, :] * snd,
                 h.to(ns_ptr.dtype.element_ty), mask=kd_mask)

    hb = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    last = G - 1
    qp, kp, gp, vp = q0 + last * sqg, k0 + last * skg, g0 + last * sgg, v0 + last * svg
    for i in range(G):
        q, k, a, v = _token(qp, kp, gp, vp, k_mask, d_mask, scale)
        hb = a[:, None] * hb
        o += tl.where(rows[:, None] == last - i, tl.sum(q[:, None] * hb, 0)[None, :], 0.0)
        hb += k[:, None] * v[None, :]
        qp, kp, gp, vp = qp - sqg, kp - skg, gp - sgg, vp - svg
    tl.store(out_ptr + b * sob + rows[:, None] * sog + hd * soh + d[None, :] * sod,
             o.to(out_ptr.dtype.element_ty), mask=(rows < G)[:, None] & d_mask[None, :])


@dataclass(frozen=True)
class Tuning:
    """Launch choices (`fsc.gpucheck` tries others; `_common.tuned` swaps them)."""

    block_v: int | None = None  # value columns a program (a power of two); None: see block_v()
    num_warps: int = 4


TUNING = Tuning()


def block_v(B: int, H: int, Dv: int, sms: int) -> int:
    """Value columns a program: 32, halved (down to 8) while the grid would give fewer than two
    programs an SM. A program steps through the block token by token, so at small B the GPU is
    filled by more, narrower programs: one sequence of the 3B shapes (20 heads, Dv 128) gets 8
    columns, 320 programs on 132 SMs, rather than 80."""
    if TUNING.block_v is not None:
        return min(C.pow2(Dv, lo=1), TUNING.block_v)
    return C.narrow(min(C.pow2(Dv, lo=1), 32), 8, lambda bv: B * H * C.cdiv(Dv, bv), sms)


def gla_block(q, k, v, gk, state, scale: float, new_state=None):
    """Triton twin of `gla_block_ref` (same shapes; output in q.dtype)."""
    op = "gla_block"
    dev = C.check(op, {"q": q, "k": k, "v": v, "gk": gk, "state": state,
                       "new_state": new_state})
    B, G, H, Dk = q.shape
    Dv = v.shape[-1]
    C.expect_shape(op, "k", k, (B, G, H, Dk))
    C.expect_shape(op, "v", v, (B, G, H, Dv))
    C.expect_shape(op, "gk", gk, (B, G, H, Dk))
    C.expect_shape(op, "state", state, (B, H, Dk, Dv))
    C.expect_shape(op, "new_state", new_state, (B, H, Dk, Dv))
    out = C.empty((B, G, H, Dv), q.dtype, dev)
    if B * H * Dk * Dv == 0:
        return out
    bv = block_v(B, H, Dv, C.sm_count(dev))
    ns = new_state if new_state is not None else state
    with C.device_guard(dev):
        _gla_kernel[(B, H, C.cdiv(Dv, bv))](
            q, k, v, gk, state, out, ns, G, Dk, Dv, float(scale),
            *q.stride(), *k.stride(), *v.stride(), *gk.stride(), *state.stride(),
            *out.stride(), *ns.stride(),
            BLOCK_G=C.pow2(G), BLOCK_K=C.pow2(Dk), BLOCK_V=bv,
            WRITE=new_state is not None, num_warps=TUNING.num_warps,
        )
    return out
