"""Log-length query scaling: `attention.logn: L`.

A query at position p with p + 1 > L is multiplied by log(p + 1) / log(L), in every path: the
block-causal training forward, the two-stream `blocks` objective, the cached step and fold
(plain, static and ragged), so cached decoding stays exact. Within L nothing changes, bit for
bit; past it the option reaches the computation; recipes that do not name it keep their hash.
"""

import math

import pytest
import torch
from model_checks import mixing_model

from fsc.decode import DecodeConfig, generate, generate_batch
from fsc.graphs import make_static
from fsc.model.attention import log_scaled
from fsc.model.lm import build_model
from fsc.recipe import load_recipe, parse_recipe
from fsc.tokenizer import ByteTokenizer

VOCAB = 280


def _logn(name: str, logn: int | None, G: int | None = None, position: str | None = None):
    data = load_recipe(name).model_dump(mode="json", exclude_none=True)
    if logn is not None:
        data["attention"]["logn"] = logn
    if position is not None:
        data["attention"]["position"] = position
    if G is not None:
        data["block_size"] = G
    return parse_recipe(data)


def _tokens(T: int, B: int = 2, seed: int = 0):
    return torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


def test_logn_is_in_the_hash_only_when_given_and_changes_no_weight():
    base = load_recipe("tiny_hybrid")
    assert _logn("tiny_hybrid", None).recipe_hash == base.recipe_hash
    scaled = _logn("tiny_hybrid", 16)
    assert scaled.recipe_hash != base.recipe_hash
    assert scaled.position_encoding == ("RoPE, theta 10000; queries past 16 scaled by "
                                        "log(p + 1) / log(16)")
    a, b = build_model(base, seed=7).state_dict(), build_model(scaled, seed=7).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


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
    tokens = _tokens(24)
    plain = mixing_model(_logn(name, None, 4)).forward_blockwise(tokens, [4] * 6)
    scaled = mixing_model(_logn(name, 24, 4)).forward_blockwise(tokens, [4] * 6)
    assert torch.equal(plain, scaled)


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_hybrid"])
@pytest.mark.parametrize("G", [1, 4])
@torch.no_grad()
def test_cached_step_and_fold_equal_the_blockwise_forward(name, G):
    m = mixing_model(_logn(name, 3, G))
    nb = 5
    tokens = _tokens(G * nb, seed=G)
    ref = m.forward_blockwise(tokens, [G] * nb)
    assert (ref - mixing_model(_logn(name, None, G)).forward_blockwise(tokens, [G] * nb)
            ).abs().max() > 1e-3  # the option reaches the logits past the length
    cache = m.empty_cache(2, G * nb, block_size=G)
    for b in range(nb):
        blk = tokens[:, b * G : (b + 1) * G]
        step = m(blk, cache)
        torch.testing.assert_close(step, ref[:, b * G : (b + 1) * G], rtol=0, atol=1e-5)
        torch.testing.assert_close(m.fold(blk, cache), step, rtol=0, atol=1e-5)


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


@torch.no_grad()
def test_two_stream_equals_its_reference_loop():
    m = mixing_model(_logn("tiny_attn", 5, 4))
    mixer = m.layers[0].mixer
    g = torch.Generator().manual_seed(4)
    x, xn = torch.randn(2, 24, m.recipe.d_model, generator=g), torch.randn(2, 12, m.recipe.d_model,
                                                                          generator=g)
    blocks = torch.tensor([[0, 3, 5], [4, 1, 2]])
    for got, want in zip(mixer.forward_two_stream(x, xn, blocks),
                         mixer.forward_two_stream_loop(x, xn, blocks), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_nope_attention_equals_a_peer_that_scales_its_queries():
    """NoPE with logn against softmax attention written here from the weights, each query past L
    scaled by log(p + 1) / log(L) before the dot products."""
    L, lengths = 5, [4, 4, 3, 4]
    x = torch.randn(2, sum(lengths), 64, generator=torch.Generator().manual_seed(1))
    mixer = mixing_model(_logn("tiny_attn", L, position="none")).layers[0].mixer
    B, T, _ = x.shape
    h, hkv, d = mixer.n_heads, mixer.n_kv_heads, mixer.head_dim
    factor = torch.tensor([max(1.0, math.log(p + 1) / math.log(L)) for p in range(T)])
    q = (x @ mixer.wq.weight.T).view(B, T, h, d) * factor[:, None, None]
    k = (x @ mixer.wk.weight.T).view(B, T, hkv, d).repeat_interleave(h // hkv, dim=2)
    v = (x @ mixer.wv.weight.T).view(B, T, hkv, d).repeat_interleave(h // hkv, dim=2)
    block = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
    scores = scores.masked_fill(block[None, :] > block[:, None], float("-inf"))
    o = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)
    peer = o.reshape(B, T, h * d) @ mixer.wo.weight.T
    torch.testing.assert_close(mixer.forward_blockwise(x, lengths), peer, rtol=1e-5, atol=1e-5)


def test_a_ragged_batch_decodes_each_row_as_alone():
    """Rows of different prompt lengths scale by their own positions, not the padded ones."""
    tok = ByteTokenizer()
    m = build_model(_logn("tiny_hybrid", 6), seed=5).eval()
    with torch.no_grad():
        m.lm_head.weight.mul_(20)
    prompts = [tok.encode(t) for t in ["Once upon a", "Hi", "To be or "]]
    for mode in ("diffusion", "ar"):
        cfg = DecodeConfig(length=8, G=4, steps=2, mode=mode)
        together = generate_batch(m, tok, prompts, cfg, batch=3)
        assert [r.token_ids for r in together] == [generate(m, tok, p, cfg).token_ids
                                                   for p in prompts]
