"""Mamba-2's decay scaled by position: `mamba.decay_from: L` (and `mamba.decay_power: k`).

A token at position p with p + 1 > L has its decay rate A times (L / (p + 1)) ** k, in every
path: the chunked training forward, the two-stream objective, the prefill of several blocks
after a prefix, the cached step and fold through the op (a rate per token), and the rows of a
ragged batch (each from its own start), so cached decoding stays exact. Within L nothing
changes, bit for bit; recipes that do not name it keep their hash and their weights.
"""

import pytest
import torch
from fsc.kernels.mamba.reference import mamba_block_scan_ref
from model_checks import (
    mixing_model,
    ragged_rows_decode_alone,
    random_tokens,
    same_weights,
    two_stream_equals_its_loop,
    variant,
    walk_blocks,
)

from fsc.errors import RecipeError
from fsc.graphs import length_free, make_static
from fsc.model.cache import copy_cache, merge_rows
from fsc.model.conv import conv_sequence
from fsc.model.lm import build_model
from fsc.model.mamba import decay_factor
from fsc.recipe import load_recipe


def _from(name: str, start: int | None, G: int | None = None, power: float | None = None):
    return variant(name, {"mamba.decay_from": start, "mamba.decay_power": power}, G)


def test_in_the_hash_only_when_given_and_no_weight_changes():
    base = load_recipe("tiny_mamba")
    assert _from("tiny_mamba", None).recipe_hash == base.recipe_hash
    scaled = _from("tiny_mamba", 8)
    assert scaled.recipe_hash != base.recipe_hash != _from("tiny_mamba", 8, power=0.5).recipe_hash
    assert scaled.decays_by_position and not base.decays_by_position
    assert same_weights(base, scaled)


def test_a_power_without_a_start_is_refused():
    with pytest.raises(RecipeError, match="decay_from"):
        _from("tiny_mamba", None, power=0.5)


def test_the_factor_is_one_within_and_the_ratio_past_it():
    got = decay_factor(torch.arange(6), 4, 1.0)
    torch.testing.assert_close(got, torch.tensor([1, 1, 1, 1, 4 / 5, 4 / 6]))
    torch.testing.assert_close(decay_factor(torch.arange(6), 4, 0.5),
                               torch.tensor([1, 1, 1, 1, (4 / 5) ** 0.5, (4 / 6) ** 0.5]))
    assert decay_factor(range(0, 4), 4, 1.0) is None  # a range within: nothing to scale
    torch.testing.assert_close(decay_factor(range(2, 6), 4, 1.0), got[2:], rtol=0, atol=0)


@pytest.mark.parametrize("name", ["tiny_mamba", "tiny_hybrid"])
@torch.no_grad()
def test_within_the_length_nothing_changes(name):
    tokens = random_tokens(24)
    plain = mixing_model(_from(name, None, 4)).forward_blockwise(tokens, [4] * 6)
    scaled = mixing_model(_from(name, 24, 4)).forward_blockwise(tokens, [4] * 6)
    assert torch.equal(plain, scaled)


@pytest.mark.parametrize("name", ["tiny_mamba", "tiny_hybrid"])
@pytest.mark.parametrize("G", [1, 4])
@torch.no_grad()
def test_cached_step_and_fold_equal_the_blockwise_forward(name, G):
    walk_blocks(mixing_model(_from(name, 3, G)), random_tokens(G * 5, seed=G), G, atol=1e-4,
                unlike=mixing_model(_from(name, None, G)))  # past the length


@torch.no_grad()
def test_a_causal_mamba_equals_the_recurrence_with_each_tokens_rate():
    """At G = 1 the mixer is causal: token by token through the reference op from a zero state,
    each token's A scaled here by max(p + 1, L) ** -k · L ** k, written apart from the option."""
    L, k, T = 5, 0.7, 12
    mixer = mixing_model(_from("tiny_mamba", L, 1, power=k)).layers[0].mixer
    x = torch.randn(2, T, mixer.d_model, generator=torch.Generator().manual_seed(1))
    z, xbc, dt = mixer._split(x)
    xs, Bm, Cm = conv_sequence(xbc, mixer.conv_weight, mixer.conv_bias).split(
        [mixer.d_inner, mixer.d_state, mixer.d_state], dim=-1)
    A = -torch.exp(mixer.A_log.float())
    state = torch.zeros(2, mixer.n_heads, mixer.head_dim, mixer.d_state)
    ys = []
    for p in range(T):
        rate = A * (L / max(p + 1, L)) ** k
        ys.append(mamba_block_scan_ref(mixer._heads(xs[:, p:p + 1]), dt[:, p:p + 1], mixer.dt_bias,
                                       rate, Bm[:, p:p + 1], Cm[:, p:p + 1], mixer.D,
                                       mixer._heads(z[:, p:p + 1]), state, state))
    want = mixer._out(torch.cat(ys, 1).flatten(2), x.dtype)
    torch.testing.assert_close(mixer.forward_blockwise(x, [1] * T), want, rtol=1e-5, atol=1e-5)


def test_two_stream_equals_its_reference_loop():
    two_stream_equals_its_loop(mixing_model(_from("tiny_mamba", 5, 4)))


@torch.no_grad()
def test_a_prefill_after_a_prefix_counts_from_the_prefix():
    """Several blocks folded at once after 8 tokens (a prompt prefilled in chunks) give what
    folding every block in turn gives."""
    m = mixing_model(_from("tiny_mamba", 6, 4))
    tokens = random_tokens(20, seed=3)
    chunked, turn = m.empty_cache(2, 20, block_size=4), m.empty_cache(2, 20, block_size=4)
    m.fold_blocks(tokens[:, :8], chunked)
    got = m.fold_blocks(tokens[:, 8:], chunked)
    for b in range(5):
        want = m.fold(tokens[:, 4 * b : 4 * b + 4], turn)[:, -1]
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    for a, b in zip(chunked.layers, turn.layers, strict=True):
        for name in a.tensors:
            torch.testing.assert_close(a.tensors[name], b.tensors[name], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["tiny_mamba", "tiny_hybrid"])
def test_a_ragged_batch_decodes_each_row_as_alone(name):
    """Rows of different prompt lengths scale their decays by their own positions."""
    ragged_rows_decode_alone(mixing_model(_from(name, 2), seed=5))


@pytest.mark.parametrize("name", ["tiny_mamba", "tiny_hybrid"])
@torch.no_grad()
def test_a_merged_cache_steps_each_row_as_alone(name):
    """The logits of a block after prompts of 11, 2 and 7 tokens folded alone and merged (as
    `generate_batch` does) are each row's alone: positions count from the row's start."""
    m = mixing_model(_from(name, 2, 4))
    lengths, G = (11, 2, 7), 4
    prompts = [random_tokens(n, B=1, seed=n) for n in lengths]
    alone = [m.empty_cache(1, n + G, block_size=G) for n in lengths]
    for p, c in zip(prompts, alone, strict=True):
        m.fold_blocks(p, c)
    merged = merge_rows([copy_cache(c) for c in alone], max(lengths) + G)
    block = random_tokens(G, B=3, seed=9)
    got = m(block, merged)
    for i, c in enumerate(alone):
        torch.testing.assert_close(got[i], m(block[i : i + 1], c)[0], rtol=1e-5, atol=1e-5)


def test_a_decay_read_by_position_is_never_replayed_at_another_length():
    for name in ("tiny_mamba", "tiny_hybrid"):
        m = build_model(_from(name, 6), seed=1).eval()
        cache = m.synthetic_cache(1, 8, capacity=16, block_size=4)
        assert not length_free(m, cache) and not make_static(m, cache)
        plain = build_model(load_recipe(name), seed=1).eval()
        assert make_static(plain, plain.synthetic_cache(1, 8, capacity=16, block_size=4))
