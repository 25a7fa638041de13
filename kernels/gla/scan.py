"""GLA's scan form (any G): steps through the G tokens twice in fp32 registers, forward from the
cached state, then backward from zero, where token t sees exp(g_t) ⊙ h'_{t+1}. Grid and state
access: see triton.py.
"""

from __future__ import annotations

import triton
import triton.language as tl
from fsc.kernels._tiles import load_f32, program, state_tile, store, token_tile


@triton.jit
def _token(q_ptrs, k_ptrs, g_ptrs, v_ptrs, k_mask, d_mask, scale):
    """q_t·scale, k_t, exp(g_t) over the key tile and v_t over the value tile, in fp32."""
    q = load_f32(q_ptrs, k_mask) * scale
    k = load_f32(k_ptrs, k_mask)
    a = tl.exp(load_f32(g_ptrs, k_mask))
    v = load_f32(v_ptrs, d_mask)
    return q, k, a, v


@triton.jit
def _gla_kernel(
    q_ptr, k_ptr, v_ptr, g_ptr, st_ptr, out_ptr, ns_ptr,
    G, DK, DV, scale,
    stride_q_batch, stride_q_token, stride_q_head, stride_q_key,
    stride_k_batch, stride_k_token, stride_k_head, stride_k_key,
    stride_v_batch, stride_v_token, stride_v_head, stride_v_value,
    stride_gate_batch, stride_gate_token, stride_gate_head, stride_gate_key,
    stride_state_batch, stride_state_head, stride_state_key, stride_state_value,
    stride_out_batch, stride_out_token, stride_out_head, stride_out_value,
    stride_new_state_batch, stride_new_state_head, stride_new_state_key, stride_new_state_value,
    BLOCK_G: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr, WRITE: tl.constexpr,
):  # fmt: skip
    b, hd, kk, d = program(BLOCK_K, BLOCK_V)
    k_mask, d_mask = kk < DK, d < DV
    kd_mask = k_mask[:, None] & d_mask[None, :]
    rows = tl.arange(0, BLOCK_G)
    # Pointers at token 0, stepped by one token's stride per iteration.
    q0 = q_ptr + b * stride_q_batch + hd * stride_q_head + kk * stride_q_key
    k0 = k_ptr + b * stride_k_batch + hd * stride_k_head + kk * stride_k_key
    g0 = g_ptr + b * stride_gate_batch + hd * stride_gate_head + kk * stride_gate_key
    v0 = v_ptr + b * stride_v_batch + hd * stride_v_head + d * stride_v_value

    h = load_f32(state_tile(st_ptr, b, hd, kk, d, stride_state_batch, stride_state_head,
                            stride_state_key, stride_state_value), kd_mask)
    o = tl.zeros([BLOCK_G, BLOCK_V], tl.float32)
    qp, kp, gp, vp = q0, k0, g0, v0
    for t in range(G):
        q, k, a, v = _token(qp, kp, gp, vp, k_mask, d_mask, scale)
        h = a[:, None] * h + k[:, None] * v[None, :]
        o = tl.where(rows[:, None] == t, tl.sum(q[:, None] * h, 0)[None, :], o)
        qp, kp = qp + stride_q_token, kp + stride_k_token
        gp, vp = gp + stride_gate_token, vp + stride_v_token
    if WRITE:
        store(state_tile(ns_ptr, b, hd, kk, d, stride_new_state_batch, stride_new_state_head,
                         stride_new_state_key, stride_new_state_value), h, kd_mask)

    hb = tl.zeros([BLOCK_K, BLOCK_V], tl.float32)
    last = G - 1
    qp, kp = q0 + last * stride_q_token, k0 + last * stride_k_token
    gp, vp = g0 + last * stride_gate_token, v0 + last * stride_v_token
    for i in range(G):
        q, k, a, v = _token(qp, kp, gp, vp, k_mask, d_mask, scale)
        hb = a[:, None] * hb
        o += tl.where(rows[:, None] == last - i, tl.sum(q[:, None] * hb, 0)[None, :], 0.0)
        hb += k[:, None] * v[None, :]
        qp, kp = qp - stride_q_token, kp - stride_k_token
        gp, vp = gp - stride_gate_token, vp - stride_v_token
    store(token_tile(out_ptr, b, hd, rows, d, stride_out_batch, stride_out_token, stride_out_head,
                     stride_out_value), o, (rows < G)[:, None] & d_mask[None, :])
