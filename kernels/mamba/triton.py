"""Bidirectional Mamba-2 block scan (per-head scalar decay, one B/C group).

Grid (B, H, head_dim tiles). A program reads its [P_tile, N] slice of the state once, in
chunks of N (fp32 in registers), and writes each chunk of the new state once. Inside the block
it uses the exact matrix form of the two scans instead of stepping token by token: with
la_t = dt_t·A (log decay, <= 0) and c_t = la_1 + … + la_t,

    y_t = exp(c_t) C_t·h0 + Σ_s L[t, s] (C_t·B_s) dt_s x_s + D x_t,      then × silu(z_t)
    L[t, s] = exp(la_{s+1} + … + la_t)             for s <= t  (forward scan, diagonal once)
            = exp(la_t + … + la_{s−1})             for s >  t  (backward scan from zero)
    h_G = exp(c_G) h0 + Σ_s exp(la_{s+1} + … + la_G) dt_s x_s B_sᵀ

Every exponent is a sum of log decays (<= 0), so nothing overflows, and each is summed on its
own (scans of the log decays), never as a difference such as c_t − c_s: that cancels to an ulp
of the running sum, which under strong decay (block log-decays in the thousands) is the whole
answer. The products are `tl.dot`s with G padded to >= 16 (16-bit C·Bᵀ natively, fp32 ones as
`_common.dot_precision` says), and no step waits on the one before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl
from fsc.kernels import _common
from fsc.kernels._tiles import load_f32, program, state_tile, store, token_tile

from fsc.errors import KernelError


@triton.jit
def _softplus(v):
    """log(1 + e^v) to a few ulps. There is no log1p, and log(1 + u) alone loses the low digits
    of a small u: Mamba's step sizes are typically 1e-3 to 0.1, where it would be off by up to
    1e-4 relative. (w − 1) − u is the rounding error of w = 1 + u, and corrects log(w)."""
    u = tl.exp(tl.minimum(v, 20.0))
    w = 1.0 + u
    return tl.where(v > 20.0, v, tl.log(w) - ((w - 1.0) - u) / w)


@triton.jit
def _log_decays(dt_ptr, a_ptr, t, G, stride_dt_token, stride_a_token, dt_bias):
    """For each token t: dt_t = softplus(dt + dt_bias), la_t = dt_t·A_t and la_{t+1}, all 0
    past the block (A_t the token's decay rate: the head's, or scaled by position). Both tokens
    come from one [G, 2] tile: one softplus, and fewer registers than two [G] vectors take (see
    tools/compile_sm90.py)."""
    j = tl.arange(0, 2)
    tj = t[:, None] + j[None, :]
    raw = load_f32(dt_ptr + tj * stride_dt_token, tj < G) + dt_bias
    dt = tl.where(tj < G, _softplus(raw), 0.0)
    la = dt * load_f32(a_ptr + tj * stride_a_token, tj < G)
    this = j[None, :] == 0
    return (
        tl.sum(tl.where(this, dt, 0.0), 1),
        tl.sum(tl.where(this, la, 0.0), 1),
        tl.sum(tl.where(this, 0.0, la), 1),
    )


@triton.jit
def _mamba_kernel(
    x_ptr, dt_ptr, dtb_ptr, a_ptr, b_ptr, c_ptr, d_ptr, z_ptr, st_ptr, out_ptr, ns_ptr,
    G, P, N,
    stride_x_batch, stride_x_token, stride_x_head, stride_x_headdim,
    stride_dt_batch, stride_dt_token, stride_dt_head,
    stride_a_batch, stride_a_token, stride_a_head,
    stride_B_batch, stride_B_token, stride_B_dstate,
    stride_C_batch, stride_C_token, stride_C_dstate,
    stride_z_batch, stride_z_token, stride_z_head, stride_z_headdim,
    stride_state_batch, stride_state_head, stride_state_headdim, stride_state_dstate,
    stride_out_batch, stride_out_token, stride_out_head, stride_out_headdim,
    stride_new_state_batch, stride_new_state_head, stride_new_state_headdim,
    stride_new_state_dstate,
    BLOCK_G: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr,
    HAS_Z: tl.constexpr, WRITE: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    b, h, t, p = program(BLOCK_G, BLOCK_P)  # t: the tokens of the block, p: head-dim rows
    s = t  # the key-side token index of G×G tiles
    nn = tl.arange(0, BLOCK_N).to(tl.int64)
    p_mask, t_mask = p < P, t < G
    tp_mask = t_mask[:, None] & p_mask[None, :]

    dt, la, la_next = _log_decays(
        dt_ptr + b * stride_dt_batch + h * stride_dt_head,
        a_ptr + b * stride_a_batch + h * stride_a_head,
        t,
        G,
        stride_dt_token,
        stride_a_token,
        tl.load(dtb_ptr + h).to(tl.float32),
    )
    cum = tl.cumsum(la, 0)
    total = tl.sum(tl.where(t == BLOCK_G - 1, cum, 0.0), 0)  # c_G (padding adds zeros)
    tail = tl.cumsum(la_next, 0, reverse=True)  # la_{s+1} + … + la_G: exactly 0 for the last
    x = load_f32(
        token_tile(x_ptr, b, h, t, p, stride_x_batch, stride_x_token, stride_x_head,
                   stride_x_headdim),
        tp_mask,
    )
    xw = x * (tl.exp(tail) * dt)[:, None]  # token s's weight in the final state

    # Over N in chunks (registers stay small): C·Bᵀ, C·h0ᵀ and the new state.
    cb = tl.zeros([BLOCK_G, BLOCK_G], tl.float32)
    ch = tl.zeros([BLOCK_G, BLOCK_P], tl.float32)
    for n0 in range(0, N, BLOCK_N):
        n = n0 + nn
        n_mask = n < N
        tn_mask = t_mask[:, None] & n_mask[None, :]
        pn_mask = p_mask[:, None] & n_mask[None, :]
        Bm = tl.load(
            b_ptr + b * stride_B_batch + t[:, None] * stride_B_token + n[None, :] * stride_B_dstate,
            mask=tn_mask,
            other=0.0,
        )
        Cm = tl.load(
            c_ptr + b * stride_C_batch + t[:, None] * stride_C_token + n[None, :] * stride_C_dstate,
            mask=tn_mask,
            other=0.0,
        )
        if UPCAST:
            Bm = Bm.to(tl.float32)
            Cm = Cm.to(tl.float32)
        h0 = load_f32(state_tile(st_ptr, b, h, p, n, stride_state_batch, stride_state_head,
                                 stride_state_headdim, stride_state_dstate), pn_mask)
        cb += tl.dot(Cm, tl.trans(Bm), input_precision=PRECISION)  # (t, s): C_t·B_s
        ch += tl.dot(Cm.to(tl.float32), tl.trans(h0), input_precision=PRECISION)  # (t, p)
        if WRITE:
            hn = h0 * tl.exp(total) + tl.dot(
                tl.trans(xw), Bm.to(tl.float32), input_precision=PRECISION
            )  # (P, N chunk)
            # Element (p, n) of the new state depends on the same element of the old one, so
            # it is stored only after that element was read: new_state may alias state.
            store(state_tile(ns_ptr, b, h, p, n, stride_new_state_batch, stride_new_state_head,
                             stride_new_state_headdim, stride_new_state_dstate), hn, pn_mask)

    # Inside the block: (G, G) mixing weights, then one product with x; plus the prefix.
    # L's exponents as columnwise scans over the summed token u (the rows): forward, la over
    # (s, t] for s <= t; backward, la over [t, s) for s > t. Each is 0 off its own side.
    la_u = la[:, None]
    expo = tl.cumsum(tl.where(t[:, None] > s[None, :], la_u, 0.0), 0) + tl.cumsum(
        tl.where(t[:, None] < s[None, :], la_u, 0.0), 0, reverse=True
    )
    w = tl.exp(expo) * cb * dt[None, :]
    y = tl.dot(w, x, input_precision=PRECISION) + tl.exp(cum)[:, None] * ch  # (G, P)
    y += tl.load(d_ptr + h).to(tl.float32) * x
    if HAS_Z:
        zv = load_f32(
            token_tile(z_ptr, b, h, t, p, stride_z_batch, stride_z_token, stride_z_head,
                       stride_z_headdim),
            tp_mask,
        )
        y = y * (zv * tl.sigmoid(zv))
    store(token_tile(out_ptr, b, h, t, p, stride_out_batch, stride_out_token, stride_out_head,
                     stride_out_headdim), y, tp_mask)


@dataclass(frozen=True)
class Tuning(_common.Choices):
    """Launch choices (`tools.gpucheck` tries others; `_common.tuned` swaps them)."""

    block_p: int | None = None  # head-dim rows a program (a power of two >= 16); None: 32, or
    # 16 when that is needed for two programs an SM
    block_n: int = 32  # state columns a step of its loop (a power of two >= 16)
    num_warps: int | None = None  # None: 8 for blocks of G >= 64 tokens, else 4


TUNING = _common.from_env("mamba", Tuning())
# Alternatives `tools.gpucheck` times (changes to TUNING).
TRIALS = [
    {"block_p": p, "block_n": n, "num_warps": w}
    for p in (16, 32, 64)
    for n in (32, 64)
    for w in (4, 8)
]


def mamba_block_scan(x, dt, dt_bias, A, Bm, Cm, D, z, state, new_state=None):
    """Triton twin of `mamba_block_scan_ref` (same shapes, A [H] or [B, G, H]; output in
    x.dtype)."""
    op = "mamba_block_scan"
    dev = _common.check(op, {"x": x, "dt": dt, "dt_bias": dt_bias, "A": A, "Bm": Bm, "Cm": Cm,
                             "D": D, "z": z, "state": state, "new_state": new_state})
    B, G, H, P = x.shape
    N = Bm.shape[-1]
    _common.expect_shape(op, "dt", dt, (B, G, H))
    for name, t in (("dt_bias", dt_bias), ("D", D)):
        _common.expect_shape(op, name, t, (H,))
    _common.expect_shape(op, "A", A, (H,) if A.dim() == 1 else (B, G, H))
    _common.expect_shape(op, "Bm", Bm, (B, G, N))
    _common.expect_shape(op, "Cm", Cm, (B, G, N))
    _common.expect_shape(op, "z", z, (B, G, H, P))
    _common.expect_shape(op, "state", state, (B, H, P, N))
    _common.expect_shape(op, "new_state", new_state, (B, H, P, N))
    if Bm.dtype != Cm.dtype:
        raise KernelError(f"{op}: Bm ({Bm.dtype}) and Cm ({Cm.dtype}) must share one dtype")
    _common.check_block(op, G)
    out = _common.empty((B, G, H, P), x.dtype, dev)
    if B == 0 or H == 0 or P == 0:
        return out
    if G == 0:
        if new_state is not None:
            new_state.copy_(state)
        return out
    tune = TUNING
    block_p = _common.width(P, tune.block_p, B, H, dev)
    block_g, block_n = _common.pow2(G), min(_common.pow2(N), tune.block_n)
    ns = new_state if new_state is not None else state
    zz = z if z is not None else x
    precision = _common.dot_precision(x.dtype)
    with _common.device_guard(dev):
        _mamba_kernel[(B, H, _common.cdiv(P, block_p))](
            x, dt, dt_bias, A, Bm, Cm, D, zz, state, out, ns, G, P, N,
            *_common.strides(x, dt, A.expand(B, G, H), Bm, Cm, zz, state, out, ns),
            BLOCK_G=block_g, BLOCK_P=block_p, BLOCK_N=block_n, HAS_Z=z is not None,
            WRITE=new_state is not None, UPCAST=_common.upcast(), PRECISION=precision,
            num_warps=tune.num_warps or (8 if block_g >= 64 else 4),
        )
    return out


mamba_block_scan.max_block = _common.MAX_G  # (fsc.ops: `auto` runs the reference for a longer block)
