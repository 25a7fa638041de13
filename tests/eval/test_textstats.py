"""The statistics beside Gen-PPL, on hand-made samples, and the shipped corpus's split."""

import math

import pytest

from fsc import corpora
from fsc.errors import UsageError
from fsc.eval import textstats


def test_entropy_repeats_and_perplexity_on_hand_made_samples():
    assert textstats.unigram_entropy([1, 1, 1, 1]) == 0
    assert textstats.unigram_entropy([1, 2, 3, 4]) == pytest.approx(math.log(4))
    assert textstats.repeat_fraction([1, 2, 1, 2, 1, 2], 2) == pytest.approx(3 / 5)
    assert textstats.repeat_fraction([1, 2, 3], 4) is None
    ppl, lo, hi = textstats.perplexity([2.0, 6.0], [2, 2])
    assert ppl == pytest.approx(math.exp(2.0))  # summed NLL over summed tokens
    assert lo < ppl < hi and lo >= math.exp(1.0) and hi <= math.exp(3.0)
    assert textstats.perplexity([1.0], [0]) == (None, None, None)
    assert textstats.mean_se([1.0, 3.0]) == (2.0, 1.0)


def test_the_shipped_corpus_is_split_as_nanogpt_splits_it():
    train, val = corpora.read("shakespeare:train"), corpora.read("shakespeare:val")
    assert len(train) + len(val) == 1_115_394 and len(train) == int(1_115_394 * 0.9)
    assert train.startswith("First Citizen:") and corpora.read("shakespeare") == train
    assert corpora.read("shakespeare", default="val") == val
    with pytest.raises(UsageError, match="split must be one of train, val"):
        corpora.read("shakespeare:test")
