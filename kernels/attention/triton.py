"""Block attention against a KV cache, flash-decoding style (split the cached length S).

Pass 1, grid (m_tiles, B·Hkv, n_splits): each program holds the G·group query rows of one KV
head (every query head of the group, so K/V are read once per group; rows padded to a power of
two >= 16) and runs an online softmax over one contiguous chunk of the cache (a software-
pipelined loop on the GPU); the last split also attends to the block's own G keys (with S = 0
there is one split and it has only those). Each writes a normalised partial output and its
log-sum-exp (base 2). Pass 2, grid (B·Hkv, m_tiles): merges the partials into [B, G, H, D].
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from fsc.kernels import _common

from fsc.errors import KernelError

LOG2E = 1.4426950408889634


@triton.jit
def _attend(
    acc,
    m_i,
    l_i,
    q,
    k_ptr,
    v_ptr,
    n_keys,
    stride_k_pos,
    stride_k_dim,
    stride_v_pos,
    stride_v_dim,
    offs_d,
    d_mask,
    qk_scale,
    BLOCK_N: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    """Online softmax (base 2) of the rows `q` [M, D] over `n_keys` keys from k_ptr / v_ptr.

    Offsets inside the chunk are int32 (a chunk is far below 2^31 elements); the int64 part
    is already in the base pointers.
    """
    offs_n = tl.arange(0, BLOCK_N)
    for n0 in range(0, n_keys, BLOCK_N):
        n_mask = n0 + offs_n < n_keys
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(
            k_ptr + (n0 + offs_n)[:, None] * stride_k_pos + offs_d[None, :] * stride_k_dim,
            mask=kv_mask,
            other=0.0,
        )
        v = tl.load(
            v_ptr + (n0 + offs_n)[:, None] * stride_v_pos + offs_d[None, :] * stride_v_dim,
            mask=kv_mask,
            other=0.0,
        )
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (M, N)
        s = tl.where(n_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _split_kernel(
    q_ptr,
    kc_ptr,
    vc_ptr,
    kb_ptr,
    vb_ptr,
    o_part,
    lse_part,
    S,
    G,
    D,
    HKV,
    GROUP,
    chunk,
    n_total,
    qk_scale,
    stride_q_batch,
    stride_q_token,
    stride_q_head,
    stride_q_dim,
    stride_k_cache_batch,
    stride_k_cache_pos,
    stride_k_cache_head,
    stride_k_cache_dim,
    stride_v_cache_batch,
    stride_v_cache_pos,
    stride_v_cache_head,
    stride_v_cache_dim,
    stride_k_block_batch,
    stride_k_block_pos,
    stride_k_block_head,
    stride_k_block_dim,
    stride_v_block_batch,
    stride_v_block_pos,
    stride_v_block_head,
    stride_v_block_dim,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_G: tl.constexpr,
    BLOCK_D: tl.constexpr,
    UPCAST: tl.constexpr,
    PRECISION: tl.constexpr,
):
    # Row tiles are the fastest grid axis: the programs that read the same K/V chunk for
    # different query rows start together, so all but the first read it from L2.
    m_tile = tl.program_id(0)
    pid_bh = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)
    n_mt = tl.num_programs(0)
    b = pid_bh // HKV
    kvh = pid_bh % HKV

    local = tl.arange(0, BLOCK_M)
    rows = m_tile * BLOCK_M + local  # row = token g * GROUP + head j within the group
    row_mask = rows < G * GROUP
    h = kvh * GROUP + rows % GROUP
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < D
    q = tl.load(
        q_ptr
        + b * stride_q_batch
        + (rows // GROUP)[:, None] * stride_q_token
        + h[:, None] * stride_q_head
        + offs_d[None, :] * stride_q_dim,
        mask=row_mask[:, None] & d_mask[None, :],
        other=0.0,
    )
    if UPCAST:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    # This split's chunk of the cache (none when S = 0): the main, pipelined loop.
    start = split.to(tl.int64) * chunk
    n_keys = tl.minimum(S - start, chunk).to(tl.int32)
    acc, m_i, l_i = _attend(
        acc,
        m_i,
        l_i,
        q,
        kc_ptr + b * stride_k_cache_batch + kvh * stride_k_cache_head + start * stride_k_cache_pos,
        vc_ptr + b * stride_v_cache_batch + kvh * stride_v_cache_head + start * stride_v_cache_pos,
        n_keys,
        stride_k_cache_pos,
        stride_k_cache_dim,
        stride_v_cache_pos,
        stride_v_cache_dim,
        offs_d,
        d_mask,
        qk_scale,
        BLOCK_N,
        UPCAST,
        PRECISION,
    )
    if split == n_total - 1:  # the last split also attends to the block's own G keys
        acc, m_i, l_i = _attend(
            acc,
            m_i,
            l_i,
            q,
            kb_ptr + b * stride_k_block_batch + kvh * stride_k_block_head,
            vb_ptr + b * stride_v_block_batch + kvh * stride_v_block_head,
            G,
            stride_k_block_pos,
            stride_k_block_dim,
            stride_v_block_pos,
            stride_v_block_dim,
            offs_d,
            d_mask,
            qk_scale,
            BLOCK_G,
            UPCAST,
            PRECISION,
        )

    # Every split sees >= 1 key, so l_i > 0 and m_i is finite (padded rows have q = 0).
    part = (pid_bh * n_mt + m_tile) * n_total + split
    tl.store(lse_part + part * BLOCK_M + local, m_i + tl.log2(l_i))
    tl.store(
        o_part + (part * BLOCK_M + local[:, None]) * BLOCK_D + offs_d[None, :], acc / l_i[:, None]
    )


@triton.jit
def _merge_kernel(
    o_part,
    lse_part,
    out_ptr,
    G,
    D,
    HKV,
    GROUP,
    n_total,
    stride_out_batch,
    stride_out_token,
    stride_out_head,
    stride_out_dim,
    BLOCK_M: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid_bh = tl.program_id(0).to(tl.int64)
    m_tile = tl.program_id(1).to(tl.int64)
    b = pid_bh // HKV
    kvh = pid_bh % HKV
    local = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D).to(tl.int64)
    base = (pid_bh * tl.num_programs(1) + m_tile) * n_total

    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for s in range(n_total):
        lse = tl.load(lse_part + (base + s) * BLOCK_M + local)
        o = tl.load(o_part + ((base + s) * BLOCK_M + local[:, None]) * BLOCK_D + offs_d[None, :])
        m_new = tl.maximum(m, lse)
        a = tl.exp2(m - m_new)
        w = tl.exp2(lse - m_new)
        acc = acc * a[:, None] + w[:, None] * o
        l_sum = l_sum * a + w
        m = m_new

    rows = m_tile * BLOCK_M + local
    h = kvh * GROUP + rows % GROUP
    mask = (rows < G * GROUP)[:, None] & (offs_d < D)[None, :]
    ptrs = (
        out_ptr
        + b * stride_out_batch
        + (rows // GROUP)[:, None] * stride_out_token
        + h[:, None] * stride_out_head
        + offs_d[None, :] * stride_out_dim
    )
    tl.store(ptrs, (acc / l_sum[:, None]).to(out_ptr.dtype.element_ty), mask=mask)


@dataclass(frozen=True)
class Tuning(_common.Choices):
    """Launch choices of `block_attention` on the GPU. `tools.gpucheck` sweeps them around these
    defaults and reports the fastest; `_common.tuned()` swaps them for a block of code."""

    block_n: int = 64  # keys a tile for 16-bit K/V (fp32 and the interpreter take 32)
    num_warps: int = 4
    num_stages: int = 3  # for 16-bit K/V (fp32 takes 2)
    # Split programs an SM holds at once; registers and shared memory allow 2 at the 3B shapes
    # (test_compile_sm90.py checks it).
    programs_per_sm: int = 2
    splits: int | None = None  # force this many splits; None lets `choose_splits` decide


TUNING = _common.from_env("attention", Tuning())
# Alternatives `tools.gpucheck` times (changes to TUNING): tile, pipeline depth and warps at the
# default split rule, then the split rule.
TRIALS = (
    [
        {"block_n": n, "num_stages": st, "num_warps": w}
        for n in (32, 64, 128)
        for st in (2, 3, 4)
        for w in (4, 8)
    ]
    + [{"programs_per_sm": k} for k in (1, 3, 4, 6)]
    + [{"splits": 1}]
)
MIN_TILES = 2  # key tiles a split holds at least
OVERHEAD_TILES = 2  # a program's fixed cost (pipeline fill, its partial write and merge read),
# in key tiles
MAX_WAVES = 8  # splits are searched up to this many waves of programs
TOLERANCE = 0.02  # fewer splits win unless more save over 2 % of the modelled time


@functools.lru_cache(maxsize=4096)
def choose_splits(units: int, tiles: int, slots: int) -> int:
    """How many splits of `tiles` key tiles each of `units` (batch × KV head × row tile) gets.

    The programs run in waves of `slots` (SMs × programs an SM holds); a wave lasts as long as
    its longest program, so the time is about ceil(programs / slots) × (tiles a split + a fixed
    overhead). This picks the fewest splits within 2 % of its minimum: one 256k sequence with
    20 KV heads on 132 SMs gets 13 splits (260 programs in 264 slots, one wave), where rounding
    the other way (14 splits, 280 programs) would leave 16 programs to run alone in a second
    wave.
    """
    limit = max(1, min(tiles // MIN_TILES, _common.cdiv(MAX_WAVES * slots, units)))
    costs = {}  # splits -> modelled time, in key tiles
    for n in range(1, limit + 1):
        per = _common.cdiv(tiles, n)
        n = _common.cdiv(tiles, per)
        costs.setdefault(n, _common.cdiv(units * n, slots) * (per + OVERHEAD_TILES))
    least = min(costs.values())
    return min(n for n, cost in costs.items() if cost <= least * (1 + TOLERANCE))


def plan(
    S: int,
    B: int,
    Hkv: int,
    G: int,
    group: int,
    D: int,
    sms: int,
    block_n: int,
    programs_per_sm: int = 2,
    splits: int | None = None,
    max_keys: int | None = None,
):
    """Tiles and splits: (BLOCK_M, m_tiles, BLOCK_N, chunk, n_splits).

    Each split is `chunk` keys (a multiple of the tile); the last may be shorter. `splits`
    forces the count (capped at one tile a split); otherwise `choose_splits` sizes the waves.
    Either way a chunk holds at most `max_keys` keys (offsets inside a chunk are int32).
    """
    rows = G * group
    block_d = _common.pow2(D)
    block_m = min(_common.pow2(rows), 64 if block_d > 64 else 128)
    m_tiles = _common.cdiv(rows, block_m)
    if S == 0:
        return block_m, m_tiles, block_n, 0, 0
    tiles = _common.cdiv(S, block_n)
    n = (
        min(max(splits, 1), tiles)
        if splits
        else choose_splits(B * Hkv * m_tiles, tiles, sms * programs_per_sm)
    )
    if max_keys is not None:
        n = max(n, _common.cdiv(tiles, max(max_keys // block_n, 1)))
    chunk = _common.cdiv(tiles, n) * block_n
    return block_m, m_tiles, block_n, chunk, _common.cdiv(S, chunk)


def block_attention(q, k_cache, v_cache, k_blk, v_blk, S: int, scale: float):
    """Triton twin of `block_attention_ref` (same shapes; output in q.dtype)."""
    op = "block_attention"
    dev = _common.check(
        op, {"q": q, "k_cache": k_cache, "v_cache": v_cache, "k_blk": k_blk, "v_blk": v_blk}
    )
    B, G, H, D = q.shape
    Ccap, Hkv = k_cache.shape[1], k_cache.shape[2]
    _common.expect_shape(op, "k_cache", k_cache, (B, Ccap, Hkv, D))
    _common.expect_shape(op, "v_cache", v_cache, (B, Ccap, Hkv, D))
    _common.expect_shape(op, "k_blk", k_blk, (B, G, Hkv, D))
    _common.expect_shape(op, "v_blk", v_blk, (B, G, Hkv, D))
    if Hkv == 0 or H % Hkv:
        raise KernelError(f"{op}: {H} query heads is not a multiple of {Hkv} KV heads")
    if not 0 <= S <= Ccap:
        raise KernelError(f"{op}: S {S} is outside 0..{Ccap} (the cache capacity)")
    if (
        k_cache.dtype != q.dtype
        or v_cache.dtype != q.dtype
        or k_blk.dtype != q.dtype
        or v_blk.dtype != q.dtype
    ):
        raise KernelError(f"{op}: q, caches and block keys must share one dtype")
    group = H // Hkv
    out = _common.empty((B, G, H, D), q.dtype, dev)
    if B == 0 or G == 0:
        return out
    # Wide key tiles for 16-bit K/V on the GPU; 32 for fp32 (registers) and the interpreter
    # (so that small test caches still span several tiles and splits)
    tune = TUNING
    wide = q.dtype != torch.float32 and D <= 128 and not _common.interpreting()
    block_n = tune.block_n if wide else 32
    # Keys a chunk may hold with int32 offsets inside it (the int64 part is in its base
    # pointer): a 256k-key chunk of 64 KV heads × 128 would pass 2^31 elements.
    per_key = max(k_cache.stride(1), v_cache.stride(1), 1)
    reach = max(abs(k_cache.stride(3)), abs(v_cache.stride(3))) * D
    max_keys = max((2**31 - 1 - reach) // per_key - block_n, block_n)
    block_m, m_tiles, block_n, chunk, n_splits = plan(
        S,
        B,
        Hkv,
        G,
        group,
        D,
        _common.sm_count(dev),
        block_n,
        tune.programs_per_sm,
        tune.splits,
        max_keys,
    )
    block_d = _common.pow2(D)
    n_total = max(n_splits, 1)  # S = 0: one program per row tile, for the block keys alone
    o_part = _common.empty((B * Hkv, m_tiles, n_total, block_m, block_d), torch.float32, dev)
    lse_part = _common.empty((B * Hkv, m_tiles, n_total, block_m), torch.float32, dev)
    precision = _common.dot_precision(q.dtype)
    with _common.device_guard(dev):
        _split_kernel[(m_tiles, B * Hkv, n_total)](
            q,
            k_cache,
            v_cache,
            k_blk,
            v_blk,
            o_part,
            lse_part,
            S,
            G,
            D,
            Hkv,
            group,
            max(chunk, 1),
            n_total,
            scale * LOG2E,
            *q.stride(),
            *k_cache.stride(),
            *v_cache.stride(),
            *k_blk.stride(),
            *v_blk.stride(),
            BLOCK_M=block_m,
            BLOCK_N=block_n,
            BLOCK_G=min(_common.pow2(G), 64),
            BLOCK_D=block_d,
            UPCAST=_common.upcast(),
            PRECISION=precision,
            num_warps=tune.num_warps,
            num_stages=2 if q.dtype == torch.float32 else tune.num_stages,
        )
        _merge_kernel[(B * Hkv, m_tiles)](
            o_part,
            lse_part,
            out,
            G,
            D,
            Hkv,
            group,
            n_total,
            *out.stride(),
            BLOCK_M=block_m,
            BLOCK_D=block_d,
            num_warps=4,
        )
    return out
