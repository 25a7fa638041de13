"""Statistics of generated text that sit beside its perplexity: a sampler that repeats itself
gets a low Gen-PPL too, so its unigram entropy and repeated n-grams are shown with it. Pure
Python and numpy."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

BOOTSTRAP_DRAWS = 1000


def unigram_entropy(ids: list[int]) -> float | None:
    """Entropy of the token histogram of one sample, nats (0 for one token; None for none: a
    sample that ended at once has no histogram, and is no evidence of repetition)."""
    if not ids:
        return None
    n = len(ids)
    return -sum(c / n * math.log(c / n) for c in Counter(ids).values())


def repeat_fraction(ids: list[int], n: int) -> float | None:
    """The fraction of a sample's n-grams that occurred earlier in it (None: shorter than n)."""
    grams = [tuple(ids[i : i + n]) for i in range(len(ids) - n + 1)]
    if not grams:
        return None
    return 1 - len(set(grams)) / len(grams)


def mean_se(values: list[float]) -> tuple[float | None, float | None]:
    """(mean, standard error of the mean); None where there are too few values."""
    if not values:
        return None, None
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, None
    return m, (sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values)) ** 0.5


def perplexity(nll: list[float], tokens: list[int], seed: int = 0,
               level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """(perplexity, low, high): exp of the summed NLL (nats) over the summed tokens of the
    samples, and a percentile bootstrap interval over samples (`level`, seeded)."""
    nll_a, tok_a = np.asarray(nll, dtype=np.float64), np.asarray(tokens, dtype=np.float64)
    if tok_a.sum() <= 0:
        return None, None, None
    ppl = math.exp(nll_a.sum() / tok_a.sum())
    if len(nll_a) < 2:
        return ppl, None, None
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(nll_a), size=(BOOTSTRAP_DRAWS, len(nll_a)))
    num, den = nll_a[pick].sum(1), tok_a[pick].sum(1)
    draws = np.exp(num[den > 0] / den[den > 0])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
    return ppl, float(lo), float(hi)
