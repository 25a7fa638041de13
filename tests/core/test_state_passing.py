"""State passing (`fsc train --state-passing`): a training form started from the state a fold of
another sequence left equals the cached decoder continuing after that sequence, and the state it
ends in is the one the cached decoder's fold leaves. Attention layers start empty."""

import pytest
import torch
from model_checks import mixing_model

from fsc.mixers.gated_delta import GatedDeltaCfg
from fsc.model.cache import Carry
from fsc.recipe import load_recipe

RECIPES = ["tiny_mamba", "passkey_mamba", "tiny_linear", "tiny_gla", "tiny_gated_delta",
           "gated_delta_conv"]
# not shipped: Gated DeltaNet with Qwen3-Next's options (grouped value heads, a conv whose
# window is passed too, a gated output norm)
VARIANTS = {"gated_delta_conv": ("tiny_gated_delta", {"gated_delta": GatedDeltaCfg(
    n_heads=2, n_v_heads=4, head_dim=16, d_conv=4, gated_norm=True, l2norm_eps=1e-6)})}


def _model(name):
    if name in VARIANTS:
        base, update = VARIANTS[name]
        return mixing_model(load_recipe(base).model_copy(update=update))
    return mixing_model(name)


def _folded(m, tokens, G, cache=None):
    """A cache after folding `tokens` block by block (into `cache` when given)."""
    B, T = tokens.shape
    cache = cache or m.empty_cache(B, 4 * T, block_size=G)
    for s in range(0, T, G):
        m.fold(tokens[:, s : s + G], cache)
    return cache


def _states(cache):
    return [{k: v.clone() for k, v in lc.tensors.items()} for lc in cache.layers]


def _tokens(m, B, T, seed):
    return torch.randint(0, m.recipe.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", RECIPES)
@torch.no_grad()
def test_blockwise_from_a_passed_state_is_the_cached_decoder_after_it(name):
    m = _model(name)
    G = m.recipe.block_size
    prefix, seq = _tokens(m, 2, 5 * G, 1), _tokens(m, 2, 6 * G, 2)
    cache = _folded(m, prefix, G)
    carry = Carry(_states(cache))
    got = m.forward_blockwise(seq, [G] * 6, carry=carry)
    for s in range(0, seq.shape[1], G):  # each block as a step against the cache, then folded
        want = m.fold(seq[:, s : s + G], cache)
        torch.testing.assert_close(got[:, s : s + G], want, rtol=1e-4, atol=1e-4)
    assert len(carry.end) == len(m.layers)
    for end, lc in zip(carry.end, cache.layers):
        for k, v in lc.tensors.items():
            torch.testing.assert_close(end[k], v, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", RECIPES)
@torch.no_grad()
def test_two_stream_from_a_passed_state_is_the_cached_decoder_after_it(name):
    m = _model(name)
    G, V = m.recipe.block_size, m.recipe.vocab_size
    B, n = 2, 5
    prefix, clean = _tokens(m, B, 3 * G, 3), _tokens(m, B, n * G, 4)
    blocks = torch.tensor([[0, 3, 4], [2, 0, 1]])  # a block at 0 starts from the passed state
    noised = _tokens(m, B, blocks.shape[1] * G, 5) % (V - 1)
    start = _states(_folded(m, prefix, G))
    carry = Carry(start)
    logits = m.forward_two_stream(clean, noised, blocks, carry=carry)
    for b in range(B):
        for k, j in enumerate(blocks[b].tolist()):
            cache = _folded(m, prefix[b : b + 1], G)
            _folded(m, clean[b : b + 1, : j * G], G, cache)
            want = m(noised[b : b + 1, k * G : (k + 1) * G], cache)
            torch.testing.assert_close(logits[b, k * G : (k + 1) * G], want[0], rtol=1e-4, atol=1e-4)
    after = _folded(m, clean, G, _folded(m, prefix, G))
    for end, lc in zip(carry.end, after.layers):
        for k, v in lc.tensors.items():
            torch.testing.assert_close(end[k], v, rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_no_passed_state_is_the_plain_training_form():
    m = mixing_model("tiny_mamba")
    G = m.recipe.block_size
    seq = _tokens(m, 2, 4 * G, 6)
    carry = Carry([None] * len(m.layers))
    assert torch.equal(m.forward_blockwise(seq, [G] * 4, carry=carry), m.forward_blockwise(seq, [G] * 4))
    blocks = torch.tensor([[0, 2], [1, 3]])
    noised = _tokens(m, 2, 2 * G, 7)
    carry = Carry([None] * len(m.layers))
    assert torch.equal(m.forward_two_stream(seq, noised, blocks, carry=carry),
                       m.forward_two_stream(seq, noised, blocks))


@torch.no_grad()
def test_the_hybrids_attention_starts_empty():
    """In a hybrid only the Mamba-2 layers carry: passing the states of an all-zero start equals
    no carry, attention's end is None, and a real passed state changes the logits."""
    m = mixing_model("passkey_hybrid")
    G = m.recipe.block_size
    seq = _tokens(m, 2, 4 * G, 8)
    kinds = [layer.mixer.kind for layer in m.layers]
    assert "attention" in kinds and "mamba" in kinds
    zero = _states(m.empty_cache(2, 4 * G, block_size=G))
    carry = Carry([None if k == "attention" else s for k, s in zip(kinds, zero)])
    torch.testing.assert_close(m.forward_blockwise(seq, [G] * 4, carry=carry), m.forward_blockwise(seq, [G] * 4))
    assert [e is None for e in carry.end] == [k == "attention" for k in kinds]
    passed = Carry(carry.detached())
    assert not torch.allclose(m.forward_blockwise(seq, [G] * 4, carry=passed),
                              m.forward_blockwise(seq, [G] * 4))


@pytest.mark.parametrize("name,backend,why", [("tiny_mamba", "fla", "mamba on fla"),
                                              ("passkey_hybrid_swa", None, "windowed attention")])
def test_a_model_that_cannot_carry_says_which_layer(name, backend, why):
    from fsc.model.lm import build_model

    m = build_model(load_recipe(name), seed=0)
    if backend is not None:
        for layer in m.layers:
            layer.mixer.backend = backend
    gap = m.state_passing_gap()
    assert gap is not None and why in gap
    assert build_model(load_recipe("passkey_hybrid"), seed=0).state_passing_gap() is None
