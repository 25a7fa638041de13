"""Sliding-window attention: `attention.window: W`.

A block reads its own tokens and the W tokens before its start, in every path: the block-causal
training forward, the two-stream `blocks` objective, and the cached step and fold, whose cache is
a ring of W slots (a fixed state). Tokens further back must change nothing, a window that covers
the whole sequence must change nothing, and recipes that do not name it keep their hash.
"""

import pytest
import torch
from model_checks import mixing_model, random_tokens, walk_blocks

from fsc.costmodel import cache_bytes
from fsc.model.lm import build_model
from fsc.recipe import load_recipe, parse_recipe

VOCAB = 280


def _windowed(name: str, window: int | None, G: int):
    data = load_recipe(name).model_dump(mode="json", exclude_none=True)
    if window is not None:
        data["attention"]["window"] = window
    data["block_size"] = G
    return parse_recipe(data)


def _tokens(T: int, B: int = 2, seed: int = 0):
    return random_tokens(T, B, seed, VOCAB)


def test_window_is_in_the_hash_only_when_given():
    base = load_recipe("tiny_hybrid")
    assert _windowed("tiny_hybrid", None, base.block_size).recipe_hash == base.recipe_hash
    assert _windowed("tiny_hybrid", 8, base.block_size).recipe_hash != base.recipe_hash


def test_window_changes_no_seeded_weight():
    full = build_model(_windowed("tiny_hybrid", None, 4), seed=7).state_dict()
    local = build_model(_windowed("tiny_hybrid", 8, 4), seed=7).state_dict()
    assert all(torch.equal(full[k], local[k]) for k in full)


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_hybrid"])
@pytest.mark.parametrize("G,W", [(1, 5), (4, 6), (4, 3), (3, 9)])
@torch.no_grad()
def test_cached_step_and_fold_equal_the_blockwise_forward(name, G, W):
    """Ring cache against the masked training forward, over more blocks than the window holds
    (W < G too: the fold keeps only the block's last W tokens)."""
    walk_blocks(mixing_model(_windowed(name, W, G)), _tokens(G * 5, seed=G), G)


@pytest.mark.parametrize("G,W", [(1, 3), (4, 5)])
@torch.no_grad()
def test_tokens_beyond_the_window_change_nothing(G, W):
    """Rewriting every token more than W before the last block's start leaves that block's
    attention output unchanged; rewriting the one token just inside the window changes it."""
    m = mixing_model(_windowed("tiny_attn", W, G))
    mixer, nb = m.layers[0].mixer, 6
    start = (nb - 1) * G
    x = torch.randn(1, G * nb, m.recipe.d_model, generator=torch.Generator().manual_seed(1))
    far, near = x.clone(), x.clone()
    far[:, : start - W] = torch.randn(1, start - W, x.shape[-1])
    near[:, start - W] += 1.0
    last = slice(start, None)
    out = mixer.forward_blockwise(x, [G] * nb)[:, last]
    torch.testing.assert_close(mixer.forward_blockwise(far, [G] * nb)[:, last], out, rtol=0, atol=0)
    assert not torch.allclose(mixer.forward_blockwise(near, [G] * nb)[:, last], out)


@pytest.mark.parametrize("G,W", [(1, 2), (4, 6)])
@torch.no_grad()
def test_a_window_over_the_whole_sequence_is_full_attention(G, W):
    nb = 3 if G == 1 else 1  # T = nb·G <= W: nothing lies outside
    full, local = (mixing_model(_windowed("tiny_hybrid", w, G)) for w in (None, W))
    tokens = _tokens(G * nb)
    torch.testing.assert_close(local.forward_blockwise(tokens, [G] * nb),
                               full.forward_blockwise(tokens, [G] * nb), rtol=0, atol=0)


@torch.no_grad()
def test_uneven_blocks_read_from_their_own_start():
    """With uneven block lengths the window counts back from each block's start."""
    m = mixing_model(_windowed("tiny_attn", 4, 4))
    lengths = [3, 5, 2, 6]
    tokens = _tokens(sum(lengths), B=1)
    ref = m.forward_blockwise(tokens, lengths)
    cache = m.empty_cache(1, sum(lengths), block_size=max(lengths))
    at = 0
    for n in lengths:
        torch.testing.assert_close(m.fold(tokens[:, at : at + n], cache), ref[:, at : at + n],
                                   rtol=0, atol=1e-5)
        at += n


@pytest.mark.parametrize("G,W", [(1, 3), (4, 6)])
@torch.no_grad()
def test_two_stream_equals_its_reference_loop(G, W):
    m = mixing_model(_windowed("tiny_attn", W, G))
    mixer = m.layers[0].mixer
    g = torch.Generator().manual_seed(4)
    d = m.recipe.d_model
    x, xn = torch.randn(2, 6 * G, d, generator=g), torch.randn(2, 3 * G, d, generator=g)
    blocks = torch.tensor([[0, 3, 5], [4, 1, 2]])
    for got, want in zip(mixer.forward_two_stream(x, xn, blocks),
                         mixer.forward_two_stream_loop(x, xn, blocks), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("S", [0, 3, 64, 4096])
def test_the_ring_is_a_fixed_state_the_cost_model_counts(S):
    r = _windowed("tiny_hybrid", 16, 4)
    m = build_model(r)
    want = m.cache_bytes(2, S)
    assert want == cache_bytes(r, 2, S)
    assert want.kv_bytes == 0  # nothing grows with S
    assert want == m.cache_bytes(2, 1)
    assert m.empty_cache(2, S + 4, block_size=4).nbytes().total_bytes == want.total_bytes
