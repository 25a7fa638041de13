import math

import pytest
import torch
from fsc.kernels import _common
from fsc.kernels.attention import triton as attn
from fsc.kernels.attention.reference import block_attention_ref
from kernel_checks import BF16, F16, F32, assert_close, dname, randn

from fsc.errors import KernelError

# (B, G, H, Hkv, D, S, capacity, dtype)
CASES = [
    (1, 1, 4, 4, 16, 0, 8, F32),        # autoregressive step, empty cache, MHA
    (2, 4, 4, 2, 16, 100, 112, F32),    # group 2, S not a multiple of the tile, several splits
    (2, 3, 8, 2, 32, 77, 80, F32),      # group 4, 12 rows padded to 16
    (1, 1, 4, 1, 16, 45, 64, F32),      # G = 1 with group 4
    (1, 2, 2, 1, 24, 33, 40, F32),      # head dim not a power of two
    (1, 17, 4, 1, 128, 20, 24, F32),    # 68 rows: two row tiles
    (1, 70, 2, 2, 16, 10, 16, F32),     # block keys span two 64-key tiles
    (2, 4, 4, 2, 16, 50, 64, F16),
    (2, 4, 4, 2, 16, 50, 64, BF16),
    (1, 2, 4, 4, 32, 0, 4, BF16),       # S = 0 in bf16
]


def _inputs(B, G, H, Hkv, D, S, cap, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = randn(B, G, H, D, dtype=dtype, gen=gen)
    kc, vc = randn(B, cap, Hkv, D, dtype=dtype, gen=gen), randn(B, cap, Hkv, D, dtype=dtype, gen=gen)
    kc[:, S:] = float("nan")  # beyond S the cache must never be read
    vc[:, S:] = float("nan")
    kb, vb = randn(B, G, Hkv, D, dtype=dtype, gen=gen), randn(B, G, Hkv, D, dtype=dtype, gen=gen)
    return q, kc, vc, kb, vb


@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}G{}H{}kv{}D{}S{}-{}".format(
    *c[:6], dname(c[7])))
def test_block_attention_matches_reference(case):
    D, S, dtype = case[4], case[5], case[7]
    q, kc, vc, kb, vb = _inputs(*case)
    before = [t.clone() for t in (kc, vc, kb, vb)]
    scale = 1 / math.sqrt(D)
    out = attn.block_attention(q, kc, vc, kb, vb, S, scale)
    assert_close(out, block_attention_ref(q, kc, vc, kb, vb, S, scale), dtype)
    for t, t0 in zip((kc, vc, kb, vb), before):
        assert torch.equal(t.nan_to_num(), t0.nan_to_num())


def test_strided_views_are_read_in_place():
    """Mixers pass views (a cache slice, a permuted q): the launcher uses strides, not copies."""
    gen = torch.Generator().manual_seed(1)
    B, G, H, Hkv, D, S = 2, 3, 4, 2, 16, 40
    q = randn(B, H, G, D, gen=gen).transpose(1, 2)
    kc = randn(B, 48, Hkv, 2 * D, gen=gen)[..., :D]
    vc = randn(B, 48, Hkv, D, gen=gen)
    kb, vb = randn(B, G, Hkv, D, gen=gen), randn(B, G, Hkv, D, gen=gen)
    out = attn.block_attention(q, kc, vc, kb, vb, S, 0.3)
    assert_close(out, block_attention_ref(q, kc, vc, kb, vb, S, 0.3), F32)


def test_plan_fills_the_gpu_at_256k():
    """One sequence at 256k with the 3B shapes (20 KV heads, G = 32) on 132 SMs: 13 splits make
    260 programs, one wave of the 264 slots (14 would spill 16 programs into a second wave)."""
    block_m, m_tiles, block_n, chunk, n_splits = attn.plan(262144, 1, 20, 32, 1, 128, 132, 64)
    assert (m_tiles, n_splits) == (1, 13)
    assert chunk % block_n == 0 and chunk * n_splits >= 262144 > chunk * (n_splits - 1)
    assert block_m >= 32 and block_m & (block_m - 1) == 0
    assert attn.plan(0, 1, 20, 32, 1, 128, 132, 64)[-1] == 0


@pytest.mark.parametrize("B", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("Hkv", [4, 8, 20, 32])
@pytest.mark.parametrize("S", [4096, 65536, 262144])
def test_splits_fill_whole_waves(B, Hkv, S):
    """Over the shapes users profile, the programs fill >= 90 % of the waves they occupy (the
    last wave is not left mostly idle) unless the cache is too short to split further, and
    every split has >= 2 key tiles."""
    sms, per_sm, block_n = 132, 2, 64
    _, m_tiles, _, chunk, n = attn.plan(S, B, Hkv, 32, 1, 128, sms, block_n, per_sm)
    programs, slots = B * Hkv * m_tiles * n, sms * per_sm
    waves = -(-programs // slots)
    if programs < 0.9 * slots:
        assert n == S // block_n // attn.MIN_TILES, (programs, n)
    else:
        assert programs / (waves * slots) >= 0.9, (programs, waves)
    assert chunk >= attn.MIN_TILES * block_n and chunk * n >= S > chunk * (n - 1)


def test_chunks_stay_within_int32_offsets():
    """A chunk's offsets are int32: with 64 KV heads × 128 (8192 elements a key), a 256k cache
    at B = 8 would fit one chunk a head by the wave model, but 2^31 / 8192 keys is the most a
    chunk may hold, so it takes more splits; a forced split count is raised the same way."""
    max_keys = (2**31 - 1 - 128) // 8192 - 64
    for splits in (None, 1):
        _, _, _, chunk, n = attn.plan(262144, 8, 64, 32, 1, 128, 132, 64, splits=splits,
                                      max_keys=max_keys)
        assert n >= 2 and (chunk + 64) * 8192 + 128 < 2**31, (chunk, n)
    assert attn.plan(262144, 8, 64, 32, 1, 128, 132, 64)[-1] == 1  # the wave model alone


def test_forced_splits_and_tuning_restore():
    """`_common.tuned()` overrides the launch choices inside its block only; any split count
    is exact."""
    case = (2, 4, 4, 2, 16, 100, 112, F32)
    q, kc, vc, kb, vb = _inputs(*case)
    want = block_attention_ref(q, kc, vc, kb, vb, 100, 0.25)
    for splits in (1, 2, 7, 1000):
        with _common.tuned(attn, splits=splits) as t:
            assert t.splits == splits and attn.TUNING.splits == splits
            assert_close(attn.block_attention(q, kc, vc, kb, vb, 100, 0.25), want, F32)
    assert attn.TUNING == attn.Tuning()
    assert attn.plan(100, 2, 2, 4, 2, 16, 4, 32, splits=1000)[-1] == 4  # one tile a split


def test_rejects_bad_arguments(monkeypatch):
    q, kc, vc, kb, vb = _inputs(1, 2, 3, 2, 16, 4, 8, F32)
    with pytest.raises(KernelError, match="multiple"):
        attn.block_attention(q, kc, vc, kb, vb, 4, 0.25)
    q, kc, vc, kb, vb = _inputs(1, 2, 4, 2, 16, 4, 8, F32)
    with pytest.raises(KernelError, match="capacity"):
        attn.block_attention(q, kc, vc, kb, vb, 9, 0.25)
    monkeypatch.setattr(_common, "interpreting", lambda: False)
    with pytest.raises(KernelError, match="CUDA"):
        attn.block_attention(q, kc, vc, kb, vb, 4, 0.25)
