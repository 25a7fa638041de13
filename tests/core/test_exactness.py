"""Cached decoding equals the uncached block-causal forward (fp32, several blocks, B > 1)."""

import pytest
import torch

from fsc.model.lm import build_model
from fsc.recipe import load_recipe

TINY = ["tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_hybrid"]


def _model(name, scale=1.0):
    m = build_model(load_recipe(name), seed=3).eval()
    if scale != 1.0:  # larger weights make every mixer matter to the logits
        with torch.no_grad():
            for layer in m.layers:
                for p in layer.mixer.parameters():
                    if p.ndim == 2:
                        p.mul_(scale)
    return m


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("G", [1, 4, 8])
@torch.no_grad()
def test_model_logits_cached_equal_blockwise(name, G):
    m = _model(name, scale=5.0)
    B, nb = 2, 3
    tokens = torch.randint(0, 280, (B, G * nb), generator=torch.Generator().manual_seed(G))
    ref = m.forward_blockwise(tokens, [G] * nb)
    cache = m.empty_cache(B, G * nb, block_size=G)
    for b in range(nb):
        blk = tokens[:, b * G : (b + 1) * G]
        before = {i: {k: t.clone() for k, t in lc.tensors.items()} for i, lc in enumerate(cache.layers)}
        step = m(blk, cache)
        for i, lc in enumerate(cache.layers):  # forward never mutates the cache
            assert all(torch.equal(before[i][k], t) for k, t in lc.tensors.items())
        torch.testing.assert_close(step, ref[:, b * G : (b + 1) * G], rtol=0, atol=1e-5)
        fold = m.fold(blk, cache)
        torch.testing.assert_close(fold, step, rtol=0, atol=1e-5)
    assert cache.length == G * nb
    # the mixers really contribute (otherwise the check above could not fail)
    assert (ref - m.lm_head(m.norm_f(m.embed(tokens))).float()).abs().max() > 1e-2


@pytest.mark.parametrize("name", TINY[:4])
@torch.no_grad()
def test_mixer_outputs_cached_equal_blockwise_uneven_blocks(name):
    """Blocks of unequal length (a prompt's partial last block) on random inputs."""
    mixer = _model(name, scale=10.0).layers[0].mixer
    lengths = [4, 4, 3, 4]
    x = torch.randn(3, sum(lengths), 64, generator=torch.Generator().manual_seed(1))
    ref = mixer.forward_blockwise(x, lengths)
    cache = mixer.empty_cache(3, sum(lengths), "cpu")
    start = 0
    for g in lengths:
        out = mixer.fold(x[:, start : start + g], cache)
        scale = ref.abs().max()
        assert (out - ref[:, start : start + g]).abs().max() <= 1e-5 * scale
        start += g


@torch.no_grad()
def test_a_wrong_cache_is_detected():
    """A cache that does not hold the prefix gives different logits (the check can fail)."""
    m = _model("tiny_hybrid", scale=5.0)
    tokens = torch.randint(0, 280, (1, 8), generator=torch.Generator().manual_seed(0))
    ref = m.forward_blockwise(tokens, [4, 4])
    cache = m.synthetic_cache(1, 4, seed=1, block_size=4)
    assert (m(tokens[:, 4:], cache) - ref[:, 4:]).abs().max() > 1e-3


def test_block_larger_than_cache_block_size_is_refused():
    m = _model("tiny_attn")
    cache = m.empty_cache(1, 16, block_size=4)
    with pytest.raises(ValueError, match="exceeds the cache's block size"):
        m(torch.zeros(1, 5, dtype=torch.long), cache)


@pytest.mark.parametrize("G, n", [(4, 16), (1, 8), (8, 3)])
@torch.no_grad()
def test_mamba_chunked_equals_blocks_in_turn(G, n):
    """The chunked training form equals the block by block loop on blocks of one length."""
    mixer = _model("tiny_mamba", scale=5.0).layers[0].mixer
    x = torch.randn(2, G * n, 64, generator=torch.Generator().manual_seed(G))
    chunked = mixer.forward_blockwise(x, [G] * n)
    looped = mixer.forward_blockwise_loop(x, [G] * n)
    scale = chunked.abs().max()
    assert (chunked - looped).abs().max() <= 1e-6 * scale
