"""Block linear attention: φ(q)·(S + Σ_blk φ(k)vᵀ) / max(φ(q)·(z + Σ_blk φ(k)), eps).

Grid (B, H, Dv tiles). A program reads its [r, Dv_tile] slice of the state once, adds the block
with one `tl.dot` (φ(K)ᵀ V, G padded to >= 16), and forms the outputs with another; all in fp32
(fp32 dots, see `_common.dot_precision`). The normaliser z is needed by every Dv tile, so only tile 0 writes the new z, and
when new_z aliases z_state across several tiles it goes through a temporary.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl
from fsc.kernels import _common
from fsc.kernels._tiles import load_f32, program, state_tile, store, token_tile

from fsc.errors import KernelError

FEATURE_CODES = {"elu1": 0, "relu": 1, "identity": 2}


@triton.jit
def _phi(t, FEATURE: tl.constexpr):
    if FEATURE == 0:
        return tl.where(t > 0, t + 1.0, tl.exp(t))  # elu(t) + 1
    elif FEATURE == 1:
        return tl.maximum(t, 0.0)
    else:
        return t


@triton.jit
def _linear_kernel(
    q_ptr, k_ptr, v_ptr, st_ptr, zs_ptr, out_ptr, ns_ptr, nz_ptr,
    G, R, DV, eps,
    stride_q_batch, stride_q_token, stride_q_head, stride_q_feature,
    stride_k_batch, stride_k_token, stride_k_head, stride_k_feature,
    stride_v_batch, stride_v_token, stride_v_head, stride_v_value,
    stride_state_batch, stride_state_head, stride_state_feature, stride_state_value,
    stride_z_batch, stride_z_head, stride_z_feature,
    stride_out_batch, stride_out_token, stride_out_head, stride_out_value,
    stride_new_state_batch, stride_new_state_head, stride_new_state_feature, stride_new_state_value,
    stride_new_z_batch, stride_new_z_head, stride_new_z_feature,
    BLOCK_G: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_V: tl.constexpr, FEATURE: tl.constexpr,
    WRITE_S: tl.constexpr, WRITE_Z: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    b, h, r, d = program(BLOCK_R, BLOCK_V)
    t = tl.arange(0, BLOCK_G).to(tl.int64)
    t_mask, r_mask, d_mask = t < G, r < R, d < DV
    tr_mask = t_mask[:, None] & r_mask[None, :]
    td_mask = t_mask[:, None] & d_mask[None, :]
    rd_mask = r_mask[:, None] & d_mask[None, :]

    q = load_f32(
        token_tile(q_ptr, b, h, t, r, stride_q_batch, stride_q_token, stride_q_head, stride_q_feature),
        tr_mask,
    )
    k = load_f32(
        token_tile(k_ptr, b, h, t, r, stride_k_batch, stride_k_token, stride_k_head, stride_k_feature),
        tr_mask,
    )
    v = load_f32(
        token_tile(v_ptr, b, h, t, d, stride_v_batch, stride_v_token, stride_v_head, stride_v_value),
        td_mask,
    )
    fq = tl.where(tr_mask, _phi(q, FEATURE), 0.0)  # padding must not count (elu1(0) = 1)
    fk = tl.where(tr_mask, _phi(k, FEATURE), 0.0)

    s0 = load_f32(state_tile(st_ptr, b, h, r, d, stride_state_batch, stride_state_head,
                             stride_state_feature, stride_state_value), rd_mask)
    z0 = load_f32(zs_ptr + b * stride_z_batch + h * stride_z_head + r * stride_z_feature, r_mask)
    s1 = s0 + tl.dot(tl.trans(fk), v, input_precision=PRECISION)  # (r, Dv_tile)
    z1 = z0 + tl.sum(fk, 0)
    num = tl.dot(fq, s1, input_precision=PRECISION)  # (G, Dv_tile)
    den = tl.maximum(tl.sum(fq * z1[None, :], 1), eps)
    store(token_tile(out_ptr, b, h, t, d, stride_out_batch, stride_out_token, stride_out_head,
                     stride_out_value), num / den[:, None], td_mask)
    if WRITE_S:  # element-wise from s0: safe when new_state is state
        store(state_tile(ns_ptr, b, h, r, d, stride_new_state_batch, stride_new_state_head,
                         stride_new_state_feature, stride_new_state_value), s1, rd_mask)
    if WRITE_Z:  # by tile 0 only
        store(nz_ptr + b * stride_new_z_batch + h * stride_new_z_head + r * stride_new_z_feature,
              z1, r < tl.where(tl.program_id(2) == 0, R, 0))


@dataclass(frozen=True)
class Tuning(_common.Choices):
    """Launch choices (`tools.gpucheck` tries others; `_common.tuned` swaps them)."""

    block_v: int | None = None  # value columns a program (a power of two >= 16); None: 32,
    # halved down to 16 while the grid would have fewer than two programs an SM
    num_warps: int | None = None  # None: 4, or 8 for a G × r tile of >= 4096 elements


TUNING = _common.from_env("linear", Tuning())
# Alternatives `tools.gpucheck` times (changes to TUNING).
TRIALS = [{"block_v": v, "num_warps": w} for v in (16, 32, 64) for w in (4, 8)]


def linear_block(q, k, v, state, z_state, feature_map: str, eps: float, new_state=None, new_z=None):
    """Triton twin of `linear_block_ref` (same shapes; output in q.dtype)."""
    op = "linear_block"
    dev = _common.check(op, {"q": q, "k": k, "v": v, "state": state, "z_state": z_state,
                             "new_state": new_state, "new_z": new_z})
    if feature_map not in FEATURE_CODES:
        raise KernelError(
            f"{op}: feature map {feature_map!r} is not one of {', '.join(FEATURE_CODES)}"
        )
    B, G, H, R = q.shape
    Dv = v.shape[-1]
    _common.expect_shape(op, "k", k, (B, G, H, R))
    _common.expect_shape(op, "v", v, (B, G, H, Dv))
    _common.expect_shape(op, "state", state, (B, H, R, Dv))
    _common.expect_shape(op, "z_state", z_state, (B, H, R))
    _common.expect_shape(op, "new_state", new_state, (B, H, R, Dv))
    _common.expect_shape(op, "new_z", new_z, (B, H, R))
    _common.check_block(op, G)
    out = _common.empty((B, G, H, Dv), q.dtype, dev)
    if B * H * R * Dv == 0:
        return out
    tune = TUNING
    block_v = _common.width(Dv, tune.block_v, B, H, dev)
    v_tiles = _common.cdiv(Dv, block_v)
    # Tile 0 writes z while other tiles may still read it: never in place across tiles.
    nz = new_z
    if new_z is not None and v_tiles > 1 and _common.aliases(new_z, z_state):
        nz = _common.empty(new_z.shape, new_z.dtype, dev)
    ns_arg = new_state if new_state is not None else state
    nz_arg = nz if nz is not None else z_state
    with _common.device_guard(dev):
        _linear_kernel[(B, H, v_tiles)](
            q, k, v, state, z_state, out, ns_arg, nz_arg, G, R, Dv, float(eps),
            *_common.strides(q, k, v, state, z_state, out, ns_arg, nz_arg),
            BLOCK_G=_common.pow2(G), BLOCK_R=_common.pow2(R), BLOCK_V=block_v,
            num_warps=tune.num_warps or _common.warps(_common.pow2(G) * _common.pow2(R)),
            FEATURE=FEATURE_CODES[feature_map], WRITE_S=new_state is not None,
            WRITE_Z=new_z is not None, PRECISION=_common.dot_precision(q.dtype),
        )
    if nz is not new_z:
        new_z.copy_(nz)
    return out


linear_block.max_block = _common.MAX_G  # (fsc.ops: `auto` runs the reference for a longer block)
