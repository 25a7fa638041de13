"""The device picker against its host reference (fsc.decode.sampler): the same greedy tokens and
priorities, the same distribution when sampling, reproducible per seed, each row's draws its
own."""

import pytest
import torch

from fsc.blocks import POLICIES
from fsc.decode.sampler import Picker, pick_ref

V = 7
BANNED = [5]


def _logits(n=6, seed=0):
    return torch.randn(n, V, generator=torch.Generator().manual_seed(seed)) * 2


@pytest.mark.parametrize("policy", POLICIES)
def test_greedy_picks_are_the_references(policy):
    logits = _logits()
    ref = pick_ref(logits, BANNED, 0.0, 1.0, policy, torch.Generator(), torch.Generator())
    got = Picker(BANNED, V, 0.0, 1.0, policy, [3], "cpu")(logits[None])
    assert torch.equal(got[0][0], ref[0]) and torch.equal(got[1][0], ref[1])
    assert (got[0] != 5).all()
    if policy != "random":  # the random order draws from another stream
        assert torch.equal(got[2][0], ref[2])
    else:
        assert ((got[2] >= 0) & (got[2] < 1)).all()


@pytest.mark.parametrize("temperature, top_p, top_k", [(1.0, 1.0, 0), (0.7, 0.8, 0),
                                                      (1.0, 1.0, 3), (0.7, 0.9, 4)])
def test_samples_follow_the_references_distribution(temperature, top_p, top_k):
    """20,000 draws of one row each way: the frequencies of every id within 0.015 of each
    other and of the distribution itself; banned ids and ids past top-k or top-p never
    drawn."""
    from fsc.decode.sampler import distribution

    logits = _logits(1, seed=4)
    n = 20_000
    ref = pick_ref(logits.expand(n, V), BANNED, temperature, top_p, "confidence",
                   torch.Generator().manual_seed(1), None, top_k)[0]
    picker = Picker(BANNED, V, temperature, top_p, "confidence", [2], "cpu", top_k)
    got = picker(logits.expand(1, n, V))[0][0]
    masked = logits.clone()
    masked[:, BANNED] = float("-inf")
    want = distribution(masked, temperature, top_p, top_k)[0]
    if top_k:  # the k most likely ids, then the top-p cut of them
        assert 0 < int((want > 0).sum()) <= top_k
        assert set((want > 0).nonzero()[:, 0].tolist()) <= set(
            masked[0].topk(top_k).indices.tolist())
    for draws in (ref, got):
        freq = torch.bincount(draws, minlength=V).double() / n
        assert (freq - want).abs().max() < 0.015
        assert freq[BANNED].sum() == 0 and freq[want == 0].sum() == 0


def test_top_k_cuts_as_transformers_cuts():
    """Temperature, then the k most likely (ties with the k-th kept), then top-p of what is
    left: transformers' TopKLogitsWarper and TopPLogitsWarper in its order."""
    from fsc.decode.sampler import distribution

    logits = torch.tensor([[2.0, 1.0, 1.0, 0.5, -1.0]])
    probs = distribution(logits, 1.0, 1.0, 2)[0]
    assert (probs > 0).tolist() == [True, True, True, False, False]  # the tie at k kept
    assert float(probs.sum()) == pytest.approx(1.0)
    top1 = distribution(logits, 1.0, 1.0, 1)[0]
    assert top1.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert torch.equal(distribution(logits, 1.0, 1.0, 0), distribution(logits, 1.0, 1.0, 99))
    pytest.importorskip("transformers")
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    scores = torch.randn(6, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for k, p in ((5, 1.0), (10, 0.7), (50, 0.5)):
        warped = TopKLogitsWarper(k)(None, scores / 0.8)
        if p < 1:
            warped = TopPLogitsWarper(p)(None, warped)
        want = torch.softmax(warped, -1)
        got = distribution(scores, 0.8, p, k)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


def test_draws_are_seeded_and_each_rows_own():
    logits = _logits(4, seed=2)[None]
    a = Picker(BANNED, V, 1.0, 1.0, "random", [7], "cpu")
    b = Picker(BANNED, V, 1.0, 1.0, "random", [7], "cpu")
    first, again = a(logits), b(logits)
    assert all(torch.equal(x, y) for x, y in zip(first, again))
    both = Picker(BANNED, V, 1.0, 1.0, "random", [7, 8], "cpu")(logits.expand(2, 4, V))
    assert all(torch.equal(x[0], y[0]) for x, y in zip(both, first))  # row 0: as alone
    other = Picker(BANNED, V, 1.0, 1.0, "random", [8], "cpu")(logits)
    assert not torch.equal(other[2], first[2])  # another seed, another order
