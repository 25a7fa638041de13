"""min-p sampling (fsc.decode.sampler.distribution): after top-k and top-p, only the ids at least
min_p times as likely as the most likely one, as transformers' MinPLogitsWarper cuts; the same
in both pickers and the uncached reference, and at the command line (`fsc decode --min-p`)."""

import json

import pytest
import torch

from fsc.decode.sampler import Picker, distribution, pick_ref

V = 7


def test_min_p_cuts_as_transformers_cuts_after_top_k_and_top_p():
    logits = torch.tensor([[2.0, 1.0, 1.0, 0.5, -1.0]])
    probs = distribution(logits, 1.0, 1.0, 0, 0.5)[0]  # e^-1 = 0.37 < 0.5 of the top: cut
    assert (probs > 0).tolist() == [True, False, False, False, False]
    probs = distribution(logits, 1.0, 1.0, 0, 0.3)[0]  # 0.37 kept, e^-1.5 = 0.22 cut
    assert (probs > 0).tolist() == [True, True, True, False, False]
    assert float(probs.sum()) == pytest.approx(1.0)
    assert torch.equal(distribution(logits, 0.0, 1.0, 0, 0.9), distribution(logits, 0.0, 1.0))
    pytest.importorskip("transformers")
    from transformers.generation.logits_process import (
        MinPLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    scores = torch.randn(6, 50, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for k, p, m in ((0, 1.0, 0.1), (10, 1.0, 0.2), (0, 0.7, 0.05), (20, 0.9, 0.3)):
        warped = scores / 0.8
        if k:
            warped = TopKLogitsWarper(k)(None, warped)
        if p < 1:
            warped = TopPLogitsWarper(p)(None, warped)
        want = torch.softmax(MinPLogitsWarper(m)(None, warped), -1)
        torch.testing.assert_close(distribution(scores, 0.8, p, k, m), want, rtol=1e-9,
                                   atol=1e-12)


def test_both_pickers_sample_the_min_p_distribution():
    """20,000 draws of one row each way: every id's frequency within 0.015 of the distribution,
    and no id under the cut drawn."""
    logits = torch.randn(1, V, generator=torch.Generator().manual_seed(4)) * 2
    n, temperature, min_p = 20_000, 1.3, 0.15
    want = distribution(logits, temperature, 1.0, 0, min_p)[0]
    assert 1 < int((want > 0).sum()) < V  # the cut keeps some ids, not all
    ref = pick_ref(logits.expand(n, V), [], temperature, 1.0, "confidence",
                   torch.Generator().manual_seed(1), None, min_p=min_p)[0]
    got = Picker([], V, temperature, 1.0, "confidence", [2], "cpu", min_p=min_p)(
        logits.expand(1, n, V))[0][0]
    for draws in (ref, got):
        freq = torch.bincount(draws, minlength=V).double() / n
        assert (freq - want).abs().max() < 0.015 and freq[want == 0].sum() == 0


def _tokens(fsc_main, *extra, recipe="tiny_hybrid"):
    res = fsc_main("decode", recipe, "--prompt", "To be or not", "--length", "12", "--json",
                   *extra)
    return json.loads(res.stdout)


@pytest.mark.parametrize("recipe, mode", [("tiny_hybrid", "diffusion"), ("tiny_mamba", "ar")])
def test_fsc_decode_min_p_at_the_command_line(fsc_main, recipe, mode):
    """--min-p 1 keeps only the most likely id: the greedy tokens at any temperature, by block
    diffusion too (the reveal order reads the model's own distribution, not the cut one, where
    every kept id was certain and the order fell to ties); a cut between is drawn alike cached
    and uncached, and the stats say it."""
    greedy = _tokens(fsc_main, "--mode", mode, "--seed", "1", recipe=recipe)["token_ids"]
    hot = ("--mode", mode, "--temperature", "3", "--seed", "1")
    assert _tokens(fsc_main, *hot, recipe=recipe)["token_ids"] != greedy
    assert _tokens(fsc_main, *hot, "--min-p", "1", recipe=recipe)["token_ids"] == greedy
    cut = _tokens(fsc_main, *hot, "--min-p", "0.2", recipe=recipe)
    assert cut["stats"]["min_p"] == 0.2
    assert cut == {**cut, "token_ids": _tokens(fsc_main, *hot, "--min-p", "0.2", "--no-cache",
                                               recipe=recipe)["token_ids"]}
    res = fsc_main("decode", recipe, "--mode", mode, "--prompt", "To be", "--length", "4",
                   "--temperature", "1", "--min-p", "0.2")
    assert "temperature 1, min-p 0.2, seed 0" in " ".join(res.stderr.split() + res.stdout.split())


@pytest.mark.parametrize("args, says", [
    (("--min-p", "0.1"), "--min-p 0.1 at --temperature 0 changes nothing"),
    (("--min-p", "1.5", "--temperature", "1"), "--min-p"),
    (("--min-p", "-0.1", "--temperature", "1"), "--min-p"),
])
def test_a_min_p_that_cannot_apply_is_refused_in_one_line(fsc_main, args, says):
    res = fsc_main("decode", "tiny_mamba", "--prompt", "Hi", *args, check=2)
    assert says in " ".join(res.stderr.split()) and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
