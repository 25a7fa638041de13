"""The logit shift (a recipe's `logit_shift`, Dream's): position j's logits are the head of
position j - 1's final hidden state in every pass (a block's first position reads the token
before the block, the cache keeping it), so cached decoding still equals the uncached
block-causal forward and the two-stream training forward, for every mixer."""

import pytest
import torch
from model_checks import EVERY_MIXER, mixing_model, with_shift

from fsc.errors import RecipeError
from fsc.model.cache import copy_cache
from fsc.objective import Batch, block_losses, draw_blocks
from fsc.recipe import load_recipe, parse_recipe
from fsc.tokenizer import ByteTokenizer

MASK = ByteTokenizer.mask_id


def _pair(name):
    """(the shipped model, the same weights with the shift)."""
    plain = mixing_model(name)
    shifted = mixing_model(with_shift(name))
    shifted.load_state_dict(plain.state_dict())
    return plain, shifted


@pytest.mark.parametrize("name", EVERY_MIXER)
@torch.no_grad()
def test_position_j_reads_the_hidden_state_of_j_minus_1(name):
    """The rule itself, against the unshifted model of the same weights (fails without the
    shift): position j > 0 gets j - 1's logits, position 0 of the sequence its own."""
    plain, shifted = _pair(name)
    G = plain.recipe.block_size
    tokens = torch.randint(0, 256, (2, 3 * G), generator=torch.Generator().manual_seed(0))
    want = plain.forward_blockwise(tokens)
    got = shifted.forward_blockwise(tokens)
    torch.testing.assert_close(got[:, 1:], want[:, :-1], rtol=0, atol=0)
    torch.testing.assert_close(got[:, 0], want[:, 0], rtol=0, atol=0)
    assert (got[:, 1:] - want[:, 1:]).abs().max() > 1e-2


@pytest.mark.parametrize("name", EVERY_MIXER)
@torch.no_grad()
def test_cached_decoding_equals_the_blockwise_and_two_stream_forwards(name):
    """Per block: a cached step of the noised block after folds of the clean blocks before it
    equals the uncached forward of (clean prefix, noised block) and the two-stream forward;
    the fold's logits equal the uncached forward's."""
    _, m = _pair(name)
    G = m.recipe.block_size
    n = 4
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 256, (2, n * G), generator=g)
    d = draw_blocks(Batch(tokens, torch.ones_like(tokens, dtype=torch.bool)), G, MASK, g)
    two_stream = m.forward_two_stream(d.clean, d.noised, d.blocks)  # (2, n·G, V)
    cache = m.empty_cache(2, n * G, block_size=G)
    for k in range(n):  # blocks in order: d.blocks[b, k] == k for every row
        assert (d.blocks[:, k] == k).all()
        unit = slice(k * G, (k + 1) * G)
        step = m(d.noised[:, unit], cache)
        alone = m.forward_blockwise(torch.cat([tokens[:, : k * G], d.noised[:, unit]], 1))
        torch.testing.assert_close(step, alone[:, k * G :], rtol=0, atol=1e-5)
        torch.testing.assert_close(step, two_stream[:, unit], rtol=0, atol=1e-5)
        fold = m.fold(tokens[:, unit], cache)
        torch.testing.assert_close(fold, m.forward_blockwise(tokens[:, : (k + 1) * G])[:, unit],
                                   rtol=0, atol=1e-5)
    assert cache.last_hidden is not None and cache.last_hidden.shape == (2, m.recipe.d_model)


@torch.no_grad()
def test_a_copied_cache_keeps_the_last_hidden_state():
    """copy_cache (a clone, or one sequence repeated) carries the hidden state the next block
    reads; a fold on the copy leaves the original's alone."""
    _, m = _pair("tiny_hybrid")
    G = m.recipe.block_size
    tokens = torch.randint(0, 256, (1, 3 * G), generator=torch.Generator().manual_seed(2))
    cache = m.empty_cache(1, 3 * G, block_size=G)
    m.fold(tokens[:, :G], cache)
    m.fold(tokens[:, G : 2 * G], cache)
    frontier = tokens[:, 2 * G :]
    step = m(frontier, cache)
    many = copy_cache(cache, 3)
    torch.testing.assert_close(m(frontier.expand(3, -1), many), step.expand(3, -1, -1),
                               rtol=0, atol=1e-5)
    kept = cache.last_hidden.clone()
    m.fold(frontier, copy_cache(cache))
    assert torch.equal(cache.last_hidden, kept)
    torch.testing.assert_close(m(frontier, cache), step, rtol=0, atol=0)


@torch.no_grad()
def test_a_synthetic_cache_of_a_shifted_model_holds_a_last_hidden_state():
    m = mixing_model(with_shift("tiny_attn"))
    assert m.synthetic_cache(2, 0, block_size=4).last_hidden is None
    cache = m.synthetic_cache(2, 8, block_size=4)
    assert cache.last_hidden.shape == (2, 64) and cache.last_hidden.abs().sum() > 0
    assert m(torch.zeros(2, 4, dtype=torch.long), cache).isfinite().all()


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_mamba"])
@torch.no_grad()
def test_two_stream_blocks_equal_each_block_read_alone(name):
    """With padding blocks and blocks out of order, the two-stream forward of a shifted model
    still gives each block its frontier logits (block_losses against the cached reading)."""
    _, m = _pair(name)
    G = m.recipe.block_size
    g = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 256, (2, 5 * G), generator=g)
    target = torch.zeros_like(tokens, dtype=torch.bool)
    target[0, G:] = True
    target[1, 3 * G] = True
    d = draw_blocks(Batch(tokens, target), G, MASK, g)
    logits = m.forward_two_stream(d.clean, d.noised, d.blocks)
    for b, k in d.scored.nonzero().tolist():
        j = int(d.blocks[b, k])
        cache = m.empty_cache(1, (j + 1) * G, block_size=G)
        for i in range(j):
            m.fold(tokens[b : b + 1, i * G : (i + 1) * G], cache)
        want = m(d.noised[b : b + 1, k * G : (k + 1) * G], cache)[0]
        torch.testing.assert_close(logits[b, k * G : (k + 1) * G], want, rtol=0, atol=1e-5)
    assert float(block_losses(m, d).sum()) > 0


def test_the_recipe_field_is_hashed_and_refused_at_G_1():
    plain = load_recipe("tiny_attn")
    shifted = with_shift("tiny_attn")
    assert shifted.recipe_hash != plain.recipe_hash
    assert "logit_shift: true" in shifted.to_yaml() and "logit_shift" not in plain.to_yaml()
    back = shifted.as_autoregressive()
    assert (back.block_size, back.logit_shift) == (1, False)
    fields = {**plain.hashed_fields(), "block_size": 1, "logit_shift": True}
    with pytest.raises(RecipeError, match="logit_shift: needs block_size > 1") as e:
        parse_recipe(fields, "r.yaml")
    assert "\n" not in str(e.value)


@torch.no_grad()
def test_ar_decoding_reads_a_shifted_model_as_a_causal_lm_without_changing_it():
    """`fsc.model.lm.read_as`: AR decoding of a shifted denoiser reads the same weights at G 1
    without the shift through a second LM object sharing every tensor; the caller's model keeps
    its own recipe, during and after (it used to be swapped in place)."""
    from fsc.decode import DecodeConfig, generate
    from fsc.model.lm import read_as

    _, shifted = _pair("tiny_hybrid")
    own = shifted.recipe
    causal = read_as(shifted, 1, False)
    assert causal is not shifted and shifted.recipe is own
    assert (causal.recipe.block_size, causal.recipe.logit_shift) == (1, False)
    assert all(a is b for a, b in zip(causal.parameters(), shifted.parameters(), strict=True))
    assert read_as(shifted, own.block_size, True) is shifted  # nothing to read otherwise
    tok = ByteTokenizer()
    cfg = DecodeConfig(length=6, G=1, steps=1, mode="ar")
    got = generate(shifted, tok, tok.encode("Hi there"), cfg)
    assert shifted.recipe is own
    assert got.token_ids == generate(causal, tok, tok.encode("Hi there"), cfg).token_ids
