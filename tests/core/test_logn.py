"""Log-length query scaling: `attention.logn: L`.

A query at position p with p + 1 > L is multiplied by log(p + 1) / log(L), in every path: the
block-causal training forward, the two-stream `blocks` objective, the cached step and fold
(plain, static and ragged), so cached decoding stays exact. Within L nothing changes, bit for
bit; past it the option reaches the computation; recipes that do not name it keep their hash.
"""

import json
import math

import pytest
import torch
from model_checks import (
    mixing_model,
    peer_attention,
    ragged_rows_decode_alone,
    random_tokens,
    same_weights,
    two_stream_equals_its_loop,
    variant,
    walk_blocks,
)

from fsc.graphs import make_static
from fsc.model.attention import log_scaled
from fsc.model.lm import build_model
from fsc.recipe import load_recipe


def _logn(name: str, logn: int | None, G: int | None = None, position: str | None = None):
    return variant(name, {"attention.logn": logn, "attention.position": position}, G)


def test_logn_is_in_the_hash_only_when_given_and_changes_no_weight():
    base = load_recipe("tiny_hybrid")
    assert _logn("tiny_hybrid", None).recipe_hash == base.recipe_hash
    scaled = _logn("tiny_hybrid", 16)
    assert scaled.recipe_hash != base.recipe_hash
    assert scaled.position_encoding == ("RoPE, theta 10000; queries past 16 scaled by "
                                        "log(p + 1) / log(16)")
    assert same_weights(base, scaled)


def test_the_factor_is_one_within_the_length_and_the_log_ratio_past_it():
    q = torch.ones(1, 6, 1, 2)
    got = log_scaled(q, torch.arange(6), 4)[0, :, 0, 0]
    want = torch.tensor([1, 1, 1, 1, math.log(5) / math.log(4), math.log(6) / math.log(4)])
    torch.testing.assert_close(got, want)
    assert log_scaled(q, range(0, 4), 4) is q  # a range within the length: untouched
    torch.testing.assert_close(log_scaled(q, range(0, 6), 4), log_scaled(q, torch.arange(6), 4),
                               rtol=0, atol=0)


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_hybrid"])
@torch.no_grad()
def test_within_the_length_nothing_changes(name):
    tokens = random_tokens(24)
    plain = mixing_model(_logn(name, None, 4)).forward_blockwise(tokens, [4] * 6)
    scaled = mixing_model(_logn(name, 24, 4)).forward_blockwise(tokens, [4] * 6)
    assert torch.equal(plain, scaled)


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_hybrid"])
@pytest.mark.parametrize("G", [1, 4])
@torch.no_grad()
def test_cached_step_and_fold_equal_the_blockwise_forward(name, G):
    walk_blocks(mixing_model(_logn(name, 3, G)), random_tokens(G * 5, seed=G), G,
                unlike=mixing_model(_logn(name, None, G)))  # past the length


@torch.no_grad()
def test_static_attention_scales_as_the_plain_form():
    model = build_model(_logn("tiny_hybrid", 5), seed=1).eval()
    ref = model.synthetic_cache(2, 9, seed=2, capacity=40, block_size=4)
    cache = model.synthetic_cache(2, 9, seed=2, capacity=40, block_size=4)
    assert make_static(model, cache)
    gen = torch.Generator().manual_seed(0)
    for g in (4, 4, 3):
        tokens = torch.randint(0, 256, (2, g), generator=gen)
        torch.testing.assert_close(model(tokens, cache), model(tokens, ref), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(model.fold(tokens, cache), model.fold(tokens, ref), atol=1e-5,
                                   rtol=1e-5)


def test_two_stream_equals_its_reference_loop():
    two_stream_equals_its_loop(mixing_model(_logn("tiny_attn", 5, 4)))


@torch.no_grad()
def test_nope_attention_equals_a_peer_that_scales_its_queries():
    """NoPE with logn against softmax attention written here from the weights, each query past L
    scaled by log(p + 1) / log(L) before the dot products."""
    L, lengths = 5, [4, 4, 3, 4]
    x = torch.randn(2, sum(lengths), 64, generator=torch.Generator().manual_seed(1))
    mixer = mixing_model(_logn("tiny_attn", L, position="none")).layers[0].mixer
    factor = torch.tensor([max(1.0, math.log(p + 1) / math.log(L)) for p in range(x.shape[1])])
    peer = peer_attention(mixer, x, lengths, factor)
    torch.testing.assert_close(mixer.forward_blockwise(x, lengths), peer, rtol=1e-5, atol=1e-5)


def test_a_ragged_batch_decodes_each_row_as_alone():
    """Rows of different prompt lengths scale by their own positions, not the padded ones."""
    ragged_rows_decode_alone(build_model(_logn("tiny_hybrid", 6), seed=5).eval())


def test_fsc_build_says_the_queries_are_scaled(cli, tmp_path):
    p = tmp_path / "logn.yaml"
    p.write_text(_logn("tiny_attn", 128).to_yaml())
    res = cli("build", p, "--json")  # (the table's line wraps with the terminal's width)
    assert res.code == 0
    assert json.loads(res.out)["position_encoding"] == (
        "RoPE, theta 10000; queries past 128 scaled by log(p + 1) / log(128)")
