"""GLA's chunk form: the block in matrix form on tensor cores, in sub-chunks of SUB rows.

With b_t the running sum of the log gates (per key dimension) and c_t = b_t - g_t,
o_t = (q_t ⊙ e^{b_t})·h0 + Σ_s A[t, s] v_s, where A[t, s] = Σ_d q_t,d k_s,d e^{E_d[t, s]},
E = b_t - b_s for s <= t (forward) and c_s - c_t for s > t (backward, from zero inside the
block; the diagonal counted once). A per-dimension gate has no G×G factorisation that is safe in
floating point (e^{b_t}·e^{-b_s} overflows once the gates sum past -88), so every exponential is
split where both factors are <= 1. Pass 1 walks the sub-chunks backwards carrying the backward
state of the later ones (as seen from just after the current one) and leaves each row's share in
an fp32 scratch; pass 2 walks forwards carrying the forward state from the cache (as seen from
just before the current sub-chunk), adds the exact in-sub-chunk part (one exponential per
element) and pass 1's share, and ends with the new state. Grid and state access: see triton.py.
"""

from __future__ import annotations

import triton
import triton.language as tl
from fsc.kernels._tiles import load_f32, program, state_tile, store, token_tile


@triton.jit
def _sub_chunk(
    q0, k0, g0, v0, t, t_mask, kk, k_mask, d, d_mask,
    stride_q_token, stride_q_key, stride_k_token, stride_k_key,
    stride_gate_token, stride_gate_key, stride_v_token, stride_v_value,
    scale,
):  # fmt: skip
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
    q_ptr, k_ptr, v_ptr, g_ptr, st_ptr, out_ptr, ns_ptr, ob_ptr,
    G, DK, DV, scale,
    stride_q_batch, stride_q_token, stride_q_head, stride_q_key,
    stride_k_batch, stride_k_token, stride_k_head, stride_k_key,
    stride_v_batch, stride_v_token, stride_v_head, stride_v_value,
    stride_gate_batch, stride_gate_token, stride_gate_head, stride_gate_key,
    stride_state_batch, stride_state_head, stride_state_key, stride_state_value,
    stride_out_batch, stride_out_token, stride_out_head, stride_out_value,
    stride_new_state_batch, stride_new_state_head, stride_new_state_key, stride_new_state_value,
    BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr, SUB: tl.constexpr, KC: tl.constexpr,
    WRITE: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    b, hd, kk, d = program(BLOCK_K, BLOCK_V)
    sub = tl.arange(0, SUB)
    kc = tl.arange(0, KC).to(tl.int64)
    k_mask, d_mask = kk < DK, d < DV
    q0 = q_ptr + b * stride_q_batch + hd * stride_q_head
    k0 = k_ptr + b * stride_k_batch + hd * stride_k_head
    g0 = g_ptr + b * stride_gate_batch + hd * stride_gate_head
    v0 = v_ptr + b * stride_v_batch + hd * stride_v_head
    ob0 = ob_ptr + b * stride_out_batch + hd * stride_out_head  # fp32 scratch, strided like out
    n_sub = tl.cdiv(G, SUB)

    # Pass 1, last sub-chunk first: the backward scan from zero. hb holds the later sub-chunks
    # as seen from just after this one; tot is this sub-chunk's gate sum.
    hb = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    for j in range(0, n_sub):
        t = (n_sub - 1 - j) * SUB + sub
        t_mask = t < G
        qi, ki, gi, li, vi = _sub_chunk(
            q0, k0, g0, v0, t, t_mask, kk, k_mask, d, d_mask,
            stride_q_token, stride_q_key, stride_k_token, stride_k_key,
            stride_gate_token, stride_gate_key, stride_v_token, stride_v_value,
            scale,
        )  # fmt: skip
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
    kd_mask = k_mask[:, None] & d_mask[None, :]
    h = load_f32(state_tile(st_ptr, b, hd, kk, d, stride_state_batch, stride_state_head,
                            stride_state_key, stride_state_value), kd_mask)
    lower = (sub[None, :] <= sub[:, None])[:, :, None]  # s <= t
    for i0 in range(0, G, SUB):
        t = i0 + sub
        t_mask = t < G
        td_mask = t_mask[:, None] & d_mask[None, :]
        qi, ki, gi, li, vi = _sub_chunk(
            q0, k0, g0, v0, t, t_mask, kk, k_mask, d, d_mask,
            stride_q_token, stride_q_key, stride_k_token, stride_k_key,
            stride_gate_token, stride_gate_key, stride_v_token, stride_v_value,
            scale,
        )  # fmt: skip
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
            qc = load_f32(q0 + t[:, None] * stride_q_token + ck[None, :] * stride_q_key, m) * scale
            kcv = load_f32(k0 + t[:, None] * stride_k_token + ck[None, :] * stride_k_key, m)
            gc = load_f32(g0 + t[:, None] * stride_gate_token + ck[None, :] * stride_gate_key, m)
            lc = tl.cumsum(gc, 0)
            xc = lc - gc
            e = tl.where(lower, lc[:, None, :] - lc[None, :, :], xc[None, :, :] - xc[:, None, :])
            a_in += tl.sum(qc[:, None, :] * kcv[None, :, :] * tl.exp(tl.minimum(e, 0.0)), 2)
        o += tl.dot(a_in, vi, input_precision=PRECISION)
        store(token_tile(out_ptr, b, hd, t, d, stride_out_batch, stride_out_token, stride_out_head,
                         stride_out_value), o, td_mask)
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
        store(state_tile(ns_ptr, b, hd, kk, d, stride_new_state_batch, stride_new_state_head,
                         stride_new_state_key, stride_new_state_value), h, kd_mask)
