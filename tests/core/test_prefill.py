"""A fold of several blocks at once (`LM.fold_blocks`, the prompt's prefill) leaves the cache
that folding each block in turn leaves, and gives its last logits, for every mixer: at G = 1
(an AR prompt, one pass instead of a fold per token) and in blocks of G with a shorter last
block, after a prefix already folded."""

import pytest
import torch

from fsc.model.cache import copy_cache
from tests.model_checks import EVERY_MIXER, mixing_model, with_shift

TOL = dict(atol=2e-4, rtol=2e-4)


def _folds(m, cache, tokens, lengths):
    """Each block folded in turn: the last logits [B, V]."""
    at = 0
    for n in lengths:
        logits = m.fold(tokens[:, at : at + n], cache)
        at += n
    return logits[:, -1]


@pytest.mark.parametrize("name", EVERY_MIXER + ["shifted tiny_hybrid"])
@pytest.mark.parametrize("G", [1, 4])
def test_fold_blocks_equals_a_fold_per_block(name, G):
    """(A shifted model at G 1 too: the logit shift's rule is the cache's, whatever G.)"""
    shifted = name.startswith("shifted ")
    m = mixing_model(with_shift(name.split()[-1]) if shifted else name, scale=2.0)
    vocab = m.recipe.vocab_size
    tokens = torch.randint(0, vocab, (2, 32), generator=torch.Generator().manual_seed(G))
    lengths = [G] * (23 // G) + ([23 % G] if 23 % G else [])  # 23 tokens, the last block short
    with torch.no_grad():
        ref = m.empty_cache(2, 40, block_size=G)
        got = m.empty_cache(2, 40, block_size=G)
        m.fold(tokens[:, :G], ref)  # a prefix already folded
        m.fold(tokens[:, :G], got)
        want = _folds(m, ref, tokens[:, G : G + 23], lengths)
        logits = m.fold_blocks(tokens[:, G : G + 23], got, lengths)
        torch.testing.assert_close(logits, want, **TOL)
        assert got.length == ref.length == G + 23
        if shifted:  # the last hidden state the next block's first position reads
            torch.testing.assert_close(got.last_hidden, ref.last_hidden, **TOL)
        for a, b in zip(got.layers, ref.layers):
            assert a.length == b.length
            for key in b.tensors:
                torch.testing.assert_close(a.tensors[key][:, : b.length] if b.growing else a.tensors[key],
                                           b.tensors[key][:, : b.length] if b.growing else b.tensors[key],
                                           **TOL)
        # and the cache reads on as the folded one does
        step = tokens[:, G + 23 : G + 23 + min(G, 4)]
        torch.testing.assert_close(m(step, copy_cache(got)), m(step, copy_cache(ref)), **TOL)


def test_fold_blocks_refuses_blocks_past_G_or_not_covering():
    m = mixing_model("tiny_attn")
    cache = m.empty_cache(1, 16, block_size=2)
    tokens = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(ValueError, match="at most G"):
        m.fold_blocks(tokens, cache, [4])
    with pytest.raises(ValueError, match="cover"):
        m.fold_blocks(tokens, cache, [2, 1])
