"""Mamba-2's decay scaled: `mamba.decay_scale: c`, every head's A times c (a token's decay
a^c), in every path (the chunked training forward, the cached step and fold through the op,
the two-stream objective), so cached decoding stays exact; recipes that do not name it keep
their hash and their weights."""

import pytest
import torch
from model_checks import mixing_model, random_tokens, same_weights, variant, walk_blocks

from fsc.recipe import load_recipe


def _scaled(name: str, c: float | None, G: int = 4):
    return variant(name, {"mamba.decay_scale": c}, G)


def test_in_the_hash_only_when_given_and_no_weight_changes():
    base = load_recipe("tiny_mamba")
    assert _scaled("tiny_mamba", None, base.block_size).recipe_hash == base.recipe_hash
    assert _scaled("tiny_mamba", 0.5, base.block_size).recipe_hash != base.recipe_hash
    assert same_weights(base, _scaled("tiny_mamba", 0.5, base.block_size))


@pytest.mark.parametrize("name", ["tiny_mamba", "tiny_hybrid"])
@pytest.mark.parametrize("G", [1, 4])
@torch.no_grad()
def test_cached_step_and_fold_equal_the_blockwise_forward(name, G):
    walk_blocks(mixing_model(_scaled(name, 0.25, G)), random_tokens(G * 4, seed=G), G,
                atol=1e-4, unlike=mixing_model(_scaled(name, None, G)))


@torch.no_grad()
def test_a_scale_is_the_same_as_a_shifted_A_log():
    """A·c = -exp(A_log + log c): the option equals the plain model with A_log moved."""
    import math

    m = mixing_model(_scaled("tiny_mamba", 0.5))
    shifted = mixing_model(_scaled("tiny_mamba", None))
    for layer in shifted.layers:
        layer.mixer.A_log.add_(math.log(0.5))
    tokens = random_tokens(16)
    torch.testing.assert_close(m.forward_blockwise(tokens, [4] * 4),
                               shifted.forward_blockwise(tokens, [4] * 4), rtol=1e-5, atol=1e-5)
