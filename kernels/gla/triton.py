"""GLA block: per-key-dimension forget gate, forward scan from the state, backward in the block.

Two forms, both grid (B, H, Dv tiles), both reading a program's [Dk, Dv_tile] slice of the state
once and writing it once (element by element from the old one, so new_state may be state):

- **chunk** (the default from G = 4): the block in matrix form on tensor cores, in sub-chunks
  of 16 rows. With b_t the running sum of the log gates (per key dimension) and
  c_t = b_t - g_t, o_t = (q_t ⊙ e^{b_t})·h0 + Σ_s A[t, s] v_s, where
  A[t, s] = Σ_d q_t,d k_s,d e^{E_d[t, s]}, E = b_t - b_s for s <= t (forward) and c_s - c_t for
  s > t (backward, from zero inside the block; the diagonal counted once). A per-dimension
  gate has no G×G factorisation that is safe in floating point (e^{b_t}·e^{-b_s} overflows
  once the gates sum past -88), so every exponential is split where both factors are <= 1.
  Pass 1 walks the sub-chunks backwards carrying the backward state of the later ones (as seen
  from just after the current one) and leaves each row's share in an fp32 scratch; pass 2
  walks forwards carrying the forward state from the cache (as seen from just before the
  current sub-chunk), adds the exact in-sub-chunk part (one exponential per element) and
  pass 1's share, and ends with the new state.
- **scan** (any G): steps through the G tokens twice in fp32 registers, forward from the cached
  state, then backward from zero, where token t sees exp(g_t) ⊙ h'_{t+1}.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import triton
import triton.language as tl
from fsc.kernels import _common


@triton.jit
def _token(q_ptrs, k_ptrs, g_ptrs, v_ptrs, k_mask, d_mask, scale):
    """q_t·scale, k_t, exp(g_t) over the key tile and v_t over the value tile, in fp32."""
    q = tl.load(q_ptrs, mask=k_mask, other=0.0).to(tl.float32) * scale
    k = tl.load(k_ptrs, mask=k_mask, other=0.0).to(tl.float32)
    a = tl.exp(tl.load(g_ptrs, mask=k_mask, other=0.0).to(tl.float32))
    v = tl.load(v_ptrs, mask=d_mask, other=0.0).to(tl.float32)
    return q, k, a, v


@triton.jit
def _gla_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    st_ptr,
    out_ptr,
    ns_ptr,
    G,
    DK,
    DV,
    scale,
    stride_q_batch,
    stride_q_token,
    stride_q_head,
    stride_q_key,
    stride_k_batch,
    stride_k_token,
    stride_k_head,
    stride_k_key,
    stride_v_batch,
    stride_v_token,
    stride_v_head,
    stride_v_value,
    stride_gate_batch,
    stride_gate_token,
    stride_gate_head,
    stride_gate_key,
    stride_state_batch,
    stride_state_head,
    stride_state_key,
    stride_state_value,
    stride_out_batch,
    stride_out_token,
    stride_out_head,
    stride_out_value,
    stride_new_state_batch,
    stride_new_state_head,
    stride_new_state_key,
    stride_new_state_value,
    BLOCK_G: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    WRITE: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    hd = tl.program_id(1).to(tl.int64)
    kk = tl.arange(0, BLOCK_K).to(tl.int64)  # int64 indices: see _common.py
    d = tl.program_id(2).to(tl.int64) * BLOCK_V + tl.arange(0, BLOCK_V)
    k_mask, d_mask = kk < DK, d < DV
    kd_mask = k_mask[:, None] & d_mask[None, :]
    rows = tl.arange(0, BLOCK_G)
    # Pointers at token 0, stepped by one token's stride per iteration.
    q0 = q_ptr + b * stride_q_batch + hd * stride_q_head + kk * stride_q_key
    k0 = k_ptr + b * stride_k_batch + hd * stride_k_head + kk * stride_k_key
    g0 = g_ptr + b * stride_gate_batch + hd * stride_gate_head + kk * stride_gate_key
    v0 = v_ptr + b * stride_v_batch + hd * stride_v_head + d * stride_v_value

    h = tl.load(
        st_ptr
        + b * stride_state_batch
        + hd * stride_state_head
        + kk[:, None] * stride_state_key
        + d[None, :] * stride_state_value,
        mask=kd_mask,
        other=0.0,
    ).to(tl.float32)
    o = tl.zeros([BLOCK_G, BLOCK_V], tl.float32)
    qp, kp, gp, vp = q0, k0, g0, v0
    for t in range(G):
        q, k, a, v = _token(qp, kp, gp, vp, k_mask, d_mask, scale)
        h = a[:, None] * h + k[:, None] * v[None, :]
        o = tl.where(rows[:, None] == t, tl.sum(q[:, None] * h, 0)[None, :], o)
        qp, kp, gp, vp = (
            qp + stride_q_token,
            kp + stride_k_token,
            gp + stride_gate_token,
            vp + stride_v_token,
        )
    if WRITE:
        tl.store(
            ns_ptr
            + b * stride_new_state_batch
            + hd * stride_new_state_head
            + kk[:, None] * stride_new_state_key
            + d[None, :] * stride_new_state_value,
            h.to(ns_ptr.dtype.element_ty),
            mask=kd_mask,
        )

    hb = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    last = G - 1
    qp, kp, gp, vp = (
        q0 + last * stride_q_token,
        k0 + last * stride_k_token,
        g0 + last * stride_gate_token,
        v0 + last * stride_v_token,
    )
    for i in range(G):
        q, k, a, v = _token(qp, kp, gp, vp, k_mask, d_mask, scale)
        hb = a[:, None] * hb
        o += tl.where(rows[:, None] == last - i, tl.sum(q[:, None] * hb, 0)[None, :], 0.0)
        hb += k[:, None] * v[None, :]
        qp, kp, gp, vp = (
            qp - stride_q_token,
            kp - stride_k_token,
            gp - stride_gate_token,
            vp - stride_v_token,
        )
    tl.store(
        out_ptr
        + b * stride_out_batch
        + rows[:, None] * stride_out_token
        + hd * stride_out_head
        + d[None, :] * stride_out_value,
        o.to(out_ptr.dtype.element_ty),
        mask=(rows < G)[:, None] & d_mask[None, :],
    )


@triton.jit
def _sub_chunk(
    q0,
    k0,
    g0,
    v0,
    t,
    t_mask,
    kk,
    k_mask,
    d,
    d_mask,
    stride_q_token,
    stride_q_key,
    stride_k_token,
    stride_k_key,
    stride_gate_token,
    stride_gate_key,
    stride_v_token,
    stride_v_value,
    scale,
):
    """One sub-chunk's q·scale, k, gates and v in fp32, with the gates' running sum inside it."""
    tk_mask = t_mask[:, None] & k_mask[None, :]
    qi = tl.load(
        q0 + t[:, None] * stride_q_token + kk[None, :] * stride_q_key, mask=tk_mask, other=0.0
    )
    ki = tl.load(
        k0 + t[:, None] * stride_k_token + kk[None, :] * stride_k_key, mask=tk_mask, other=0.0
    )
    gi = tl.load(
        g0 + t[:, None] * stride_gate_token + kk[None, :] * stride_gate_key, mask=tk_mask, other=0.0
    )
    vi = tl.load(
        v0 + t[:, None] * stride_v_token + d[None, :] * stride_v_value,
        mask=t_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    gi = gi.to(tl.float32)
    return qi.to(tl.float32) * scale, ki.to(tl.float32), gi, tl.cumsum(gi, 0), vi.to(tl.float32)


@triton.jit
def _gla_chunk_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    st_ptr,
    out_ptr,
    ns_ptr,
    ob_ptr,
    G,
    DK,
    DV,
    scale,
    stride_q_batch,
    stride_q_token,
    stride_q_head,
    stride_q_key,
    stride_k_batch,
    stride_k_token,
    stride_k_head,
    stride_k_key,
    stride_v_batch,
    stride_v_token,
    stride_v_head,
    stride_v_value,
    stride_gate_batch,
    stride_gate_token,
    stride_gate_head,
    stride_gate_key,
    stride_state_batch,
    stride_state_head,
    stride_state_key,
    stride_state_value,
    stride_out_batch,
    stride_out_token,
    stride_out_head,
    stride_out_value,
    stride_new_state_batch,
    stride_new_state_head,
    stride_new_state_key,
    stride_new_state_value,
    BLOCK_K: tl.constexpr,
    BLOCK_V: tl.constexpr,
    SUB: tl.constexpr,
    KC: tl.constexpr,
    WRITE: tl.constexpr,
    PRECISION: tl.constexpr,
):
    b = tl.program_id(0).to(tl.int64)
    hd = tl.program_id(1).to(tl.int64)
    kk = tl.arange(0, BLOCK_K).to(tl.int64)
    d = tl.program_id(2).to(tl.int64) * BLOCK_V + tl.arange(0, BLOCK_V)
    sub = tl.arange(0, SUB)
    kc = tl.arange(0, KC).to(tl.int64)
    k_mask, d_mask = kk < DK, d < DV
    q0 = q_ptr + b * stride_q_batch + hd * stride_q_head
    k0 = k_ptr + b * stride_k_batch + hd * stride_k_head
    g0 = g_ptr + b * stride_gate_batch + hd * stride_gate_head
    v0 = v_ptr + b * stride_v_batch + hd * stride_v_head
    ob0 = (
        ob_ptr + b * stride_out_batch + hd * stride_out_head
    )  # fp32 scratch shaped and strided like the output
    n_sub = tl.cdiv(G, SUB)

    # Pass 1, last sub-chunk first: the backward scan from zero. hb holds the later sub-chunks
    # as seen from just after this one; tot is this sub-chunk's gate sum.
    hb = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    for j in range(0, n_sub):
        t = (n_sub - 1 - j) * SUB + sub
        t_mask = t < G
        qi, ki, gi, li, vi = _sub_chunk(
            q0,
            k0,
            g0,
            v0,
            t,
            t_mask,
            kk,
            k_mask,
            d,
            d_mask,
            stride_q_token,
            stride_q_key,
            stride_k_token,
            stride_k_key,
            stride_gate_token,
            stride_gate_key,
            stride_v_token,
            stride_v_value,
            scale,
        )
        tot = tl.sum(gi, 0)
        ob = tl.dot(
            qi * tl.exp(tl.minimum(tot[None, :] - li + gi, 0.0)), hb, input_precision=PRECISION
        )
        tl.store(
            ob0 + t[:, None] * stride_out_token + d[None, :] * stride_out_value,
            ob,
            mask=t_mask[:, None] & d_mask[None, :],
        )
        kb = ki * tl.exp(tl.minimum(li - gi, 0.0))
        hb = tl.exp(tot)[:, None] * hb + tl.dot(tl.trans(kb), vi, input_precision=PRECISION)
    tl.debug_barrier()  # pass 2 reads what other threads of this program stored

    # Pass 2, first sub-chunk first: the forward scan from the cached state, the exact
    # in-sub-chunk part of both directions, and pass 1's output.
    h = tl.load(
        st_ptr
        + b * stride_state_batch
        + hd * stride_state_head
        + kk[:, None] * stride_state_key
        + d[None, :] * stride_state_value,
        mask=k_mask[:, None] & d_mask[None, :],
        other=0.0,
    ).to(tl.float32)
    lower = (sub[None, :] <= sub[:, None])[:, :, None]  # s <= t
    for i0 in range(0, G, SUB):
        t = i0 + sub
        t_mask = t < G
        td_mask = t_mask[:, None] & d_mask[None, :]
        qi, ki, gi, li, vi = _sub_chunk(
            q0,
            k0,
            g0,
            v0,
            t,
            t_mask,
            kk,
            k_mask,
            d,
            d_mask,
            stride_q_token,
            stride_q_key,
            stride_k_token,
            stride_k_key,
            stride_gate_token,
            stride_gate_key,
            stride_v_token,
            stride_v_value,
            scale,
        )
        tot = tl.sum(tl.where((sub == SUB - 1)[:, None], li, 0.0), 0)  # li's last row
        o = tl.dot(qi * tl.exp(li), h, input_precision=PRECISION)
        o += tl.load(
            ob0 + t[:, None] * stride_out_token + d[None, :] * stride_out_value,
            mask=td_mask,
            other=0.0,
        )
        a_in = tl.zeros([SUB, SUB], tl.float32)
        for c0 in range(0, DK, KC):  # (SUB, SUB, KC) exponents, a key chunk at a time
            ck = c0 + kc
            m = t_mask[:, None] & (ck < DK)[None, :]
            qc = (
                tl.load(
                    q0 + t[:, None] * stride_q_token + ck[None, :] * stride_q_key, mask=m, other=0.0
                ).to(tl.float32)
                * scale
            )
            kcv = tl.load(
                k0 + t[:, None] * stride_k_token + ck[None, :] * stride_k_key, mask=m, other=0.0
            ).to(tl.float32)
            gc = tl.load(
                g0 + t[:, None] * stride_gate_token + ck[None, :] * stride_gate_key,
                mask=m,
                other=0.0,
            ).to(tl.float32)
            lc = tl.cumsum(gc, 0)
            xc = lc - gc
            e = tl.where(lower, lc[:, None, :] - lc[None, :, :], xc[None, :, :] - xc[:, None, :])
            a_in += tl.sum(qc[:, None, :] * kcv[None, :, :] * tl.exp(tl.minimum(e, 0.0)), 2)
        o += tl.dot(a_in, vi, input_precision=PRECISION)
        tl.store(
            out_ptr
            + b * stride_out_batch
            + t[:, None] * stride_out_token
            + hd * stride_out_head
            + d[None, :] * stride_out_value,
            o.to(out_ptr.dtype.element_ty),
            mask=td_mask,
        )
        # Token s's weight in the new state: the gates after it in the sub-chunk, summed on
        # their own (tot - li[s] would cancel to an ulp of tot); the last token's is exp(0).
        gn = tl.load(
            g0 + (t[:, None] + 1) * stride_gate_token + kk[None, :] * stride_gate_key,
            mask=((sub < SUB - 1) & (t + 1 < G))[:, None] & k_mask[None, :],
            other=0.0,
        )
        kf = ki * tl.exp(tl.cumsum(gn.to(tl.float32), 0, reverse=True))
        h = tl.exp(tot)[:, None] * h + tl.dot(tl.trans(kf), vi, input_precision=PRECISION)
    if WRITE:
        tl.store(
            ns_ptr
            + b * stride_new_state_batch
            + hd * stride_new_state_head
            + kk[:, None] * stride_new_state_key
            + d[None, :] * stride_new_state_value,
            h.to(ns_ptr.dtype.element_ty),
            mask=k_mask[:, None] & d_mask[None, :],
        )


@dataclass(frozen=True)
class Tuning(_common.Choices):
    """Launch choices (`tools.gpucheck` tries others; `_common.tuned` swaps them)."""

    LEAST_BLOCK: ClassVar[int] = 1  # the scan takes any width (the chunk form raises it to 16)
    form: str = "auto"  # "chunk", "scan", or "auto": see form()
    block_v: int | None = None  # value columns a program (a power of two); None: see block_v()
    num_warps: int | None = None  # None: 4 for the scan; 4 or 8 for the chunk form
    num_stages: int | None = None  # software pipelining of the chunk form; None: Triton's


TUNING = _common.from_env("gla", Tuning())
# Alternatives `tools.gpucheck` times (changes to TUNING): both forms.
TRIALS = [
    {"form": "scan", "block_v": v, "num_warps": w} for v in (8, 16, 32) for w in (1, 2, 4)
] + [
    {"form": "chunk", "block_v": v, "num_warps": w, "num_stages": st}
    for v in (16, 32, 64, 128)
    for w in (4, 8)
    for st in (1, 3)
]
SUB = 16  # rows of a sub-chunk in the chunk form (tl.dot wants >= 16)
KC = 16  # key columns a step of its exact in-sub-chunk part


def form(G: int, Dk: int) -> str:
    """Which kernel runs: the `Tuning` choice, or for "auto" the chunk form once a block has
    4 tokens (shorter ones are a few sequential steps) and Dk <= 256 (its [Dk, block_v] state
    tile and [16, Dk] sub-chunk tiles stay in registers)."""
    if TUNING.form == "scan" or _common.pow2(Dk) > 256:
        return "scan"
    return "chunk" if TUNING.form == "chunk" or G >= 4 else "scan"


def block_v(B: int, H: int, Dv: int, sms: int, kind: str = "scan") -> int:
    """Value columns a program. The scan: 32, halved (down to 8) while the grid would give
    fewer than two programs an SM; a program steps through the block token by token, so at
    small B the GPU is filled by more, narrower programs (one sequence of the 3B shapes, 20
    heads and Dv 128, gets 8 columns: 320 programs on 132 SMs rather than 80). The chunk form:
    64, halved down to 16 (tl.dot's least) the same way."""
    lo = 16 if kind == "chunk" else 1  # the chunk form's tl.dot takes >= 16 columns
    width = _common.pow2(Dv, lo=lo)
    if TUNING.block_v is not None:
        return max(min(width, TUNING.block_v), lo)
    widest, least = (64, 16) if kind == "chunk" else (32, 8)
    return _common.narrow(min(width, widest), least, lambda bv: B * H * _common.cdiv(Dv, bv), sms)


def gla_block(q, k, v, gk, state, scale: float, new_state=None):
    """Triton twin of `gla_block_ref` (same shapes; output in q.dtype)."""
    op = "gla_block"
    dev = _common.check(
        op, {"q": q, "k": k, "v": v, "gk": gk, "state": state, "new_state": new_state}
    )
    B, G, H, Dk = q.shape
    Dv = v.shape[-1]
    _common.expect_shape(op, "k", k, (B, G, H, Dk))
    _common.expect_shape(op, "v", v, (B, G, H, Dv))
    _common.expect_shape(op, "gk", gk, (B, G, H, Dk))
    _common.expect_shape(op, "state", state, (B, H, Dk, Dv))
    _common.expect_shape(op, "new_state", new_state, (B, H, Dk, Dv))
    out = _common.empty((B, G, H, Dv), q.dtype, dev)
    if B * H * Dk * Dv == 0:
        return out
    kind = form(G, Dk)
    bv = block_v(B, H, Dv, _common.sm_count(dev), kind)
    ns = new_state if new_state is not None else state
    strides = (
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *gk.stride(),
        *state.stride(),
        *out.stride(),
        *ns.stride(),
    )
    grid = (B, H, _common.cdiv(Dv, bv))
    block_k = _common.pow2(Dk)
    with _common.device_guard(dev):
        if kind == "chunk":
            ob = _common.empty(
                out.shape, torch.float32, dev
            )  # pass 1's backward part, same strides
            _gla_chunk_kernel[grid](
                q,
                k,
                v,
                gk,
                state,
                out,
                ns,
                ob,
                G,
                Dk,
                Dv,
                float(scale),
                *strides,
                BLOCK_K=block_k,
                BLOCK_V=bv,
                SUB=SUB,
                KC=min(KC, block_k),
                WRITE=new_state is not None,
                PRECISION=_common.dot_precision(q.dtype),
                num_warps=TUNING.num_warps or _common.warps(block_k * bv),
                **({"num_stages": TUNING.num_stages} if TUNING.num_stages else {}),
            )
        else:
            _gla_kernel[grid](
                q,
                k,
                v,
                gk,
                state,
                out,
                ns,
                G,
                Dk,
                Dv,
                float(scale),
                *strides,
                BLOCK_G=_common.pow2(G),
                BLOCK_K=block_k,
                BLOCK_V=bv,
                WRITE=new_state is not None,
                num_warps=TUNING.num_warps or 4,
            )
    return out
