"""Cached decoding equals the uncached block-causal forward (fp32, several blocks, B > 1)."""

import pytest
import torch
from model_checks import blockwise, mixing_model

TINY = ["tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_hybrid"]


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("G", [1, 4, 8])
@torch.no_grad()
def test_model_logits_cached_equal_blockwise(name, G):
    m = mixing_model(name, scale=5.0)
    tokens, ref, cache, spans = blockwise(m, G, 280)
    for span in spans:
        blk = tokens[:, span]
        before = {i: {k: t.clone() for k, t in lc.tensors.items()} for i, lc in enumerate(cache.layers)}
        step = m(blk, cache)
        for i, lc in enumerate(cache.layers):  # forward never mutates the cache
            assert all(torch.equal(before[i][k], t) for k, t in lc.tensors.items())
        torch.testing.assert_close(step, ref[:, span], rtol=0, atol=1e-5)
        fold = m.fold(blk, cache)
        torch.testing.assert_close(fold, step, rtol=0, atol=1e-5)
    assert cache.length == tokens.shape[1]
    # the mixers really contribute (otherwise the check above could not fail)
    assert (ref - m.lm_head(m.norm_f(m.embed(tokens))).float()).abs().max() > 1e-2


@pytest.mark.parametrize("name", TINY[:4])
@torch.no_grad()
def test_mixer_outputs_cached_equal_blockwise_uneven_blocks(name):
    """Blocks of unequal length (a prompt's partial last block) on random inputs."""
    mixer = mixing_model(name, scale=10.0).layers[0].mixer
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
    m = mixing_model("tiny_hybrid", scale=5.0)
    tokens = torch.randint(0, 280, (1, 8), generator=torch.Generator().manual_seed(0))
    ref = m.forward_blockwise(tokens, [4, 4])
    cache = m.synthetic_cache(1, 4, seed=1, block_size=4)
    assert (m(tokens[:, 4:], cache) - ref[:, 4:]).abs().max() > 1e-3


def test_block_larger_than_cache_block_size_is_refused():
    m = mixing_model("tiny_attn", scale=1.0)
    cache = m.empty_cache(1, 16, block_size=4)
    with pytest.raises(ValueError, match="exceeds the cache's block size"):
        m(torch.zeros(1, 5, dtype=torch.long), cache)


@pytest.mark.parametrize("G, n", [(4, 16), (1, 8), (8, 3)])
@torch.no_grad()
def test_mamba_chunked_equals_blocks_in_turn(G, n):
    """The chunked training form equals the block by block loop on blocks of one length."""
    mixer = mixing_model("tiny_mamba", scale=5.0).layers[0].mixer
    x = torch.randn(2, G * n, 64, generator=torch.Generator().manual_seed(G))
    chunked = mixer.forward_blockwise(x, [G] * n)
    looped = mixer.forward_blockwise_loop(x, [G] * n)
    scale = chunked.abs().max()
    assert (chunked - looped).abs().max() <= 1e-6 * scale
