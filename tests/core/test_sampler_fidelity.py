"""The sampler against the references a researcher reads it by: transformers' logits processors
for what a token is drawn from (the repetition penalty, temperature, top-k, top-p, min-p, in
its order, with its rule at each edge), LLaDA's and Fast-dLLM's low-confidence remasking for
what ranks a masked position and what a threshold compares (the model's own probabilities, at
temperature 1, before the cuts)."""

import json

import pytest
import torch

from fsc.decode.denoise import Steps
from fsc.decode.sampler import HostPicker, Picker, distribution, penalize, pick_ref

MASK = 4
# four positions of a block, each a distribution over 5 ids (id 4, the mask, never drawn):
# the most likely id's probability .5, .9, .6, .7, so the confidence order is 1, 3, 2, 0
ROWS = torch.tensor([[.5, .4, .05, .05, 0], [.9, .05, .03, .02, 0], [.6, .1, .1, .2, 0],
                     [.7, .29, .005, .005, 0]], dtype=torch.float64)
LOGITS = ROWS.clamp_min(1e-12).log()


def test_the_sampled_distribution_is_transformers_processors_in_its_order():
    """The same logits through transformers' processors (the repetition penalty over the ids
    seen, then temperature, top-k, top-p, min-p) and through fsc's: the same ids kept, the
    same probabilities."""
    pytest.importorskip("transformers")
    from transformers.generation.logits_process import (
        LogitsProcessorList,
        MinPLogitsWarper,
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    gen = torch.Generator().manual_seed(0)
    for T, k, p, m, penalty in ((0.7, 0, 0.9, 0.0, 1.3), (1.3, 10, 0.8, 0.05, 0.8),
                                (0.5, 5, 1.0, 0.2, 1.1), (1.0, 0, 0.5, 0.1, 1.5)):
        logits = torch.randn(4, 40, generator=gen) * 3
        ids = torch.randint(0, 40, (4, 12), generator=gen)
        procs = LogitsProcessorList([RepetitionPenaltyLogitsProcessor(penalty),
                                     TemperatureLogitsWarper(T)])
        procs += [w for w, on in ((TopKLogitsWarper(k or 1), k), (TopPLogitsWarper(p), p < 1),
                                  (MinPLogitsWarper(m), m)) if on]
        want = torch.softmax(procs(ids, logits.clone()).double(), -1)
        seen = torch.zeros(4, 40, dtype=torch.bool).scatter(1, ids, True)
        got = distribution(penalize(logits, seen, penalty), T, p, k, m)
        assert torch.equal(got > 0, want > 0)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_top_p_keeps_the_lower_ids_tied_at_its_edge():
    """128 equally likely ids, top-p 0.25: 32 of them are kept, ids 0..31 (as greedy decoding
    takes the lowest of tied ids), not whichever an unstable sort happens to put first, which
    also differs between the host's sort and the device's."""
    probs = distribution(torch.zeros(2, 128), 1.0, 0.25)
    assert (probs > 0).nonzero()[:, 1].tolist() == list(range(32)) * 2
    assert torch.allclose(probs[:, :32], torch.full((2, 32), 1 / 32, dtype=torch.float64))


@pytest.mark.parametrize("policy", ["confidence", "margin", "entropy"])
def test_a_positions_priority_is_the_models_own_distributions(policy):
    """Sampled at temperature 0.5 with top-k 1, each position draws its most likely id; its
    confidence is that id's probability under softmax(logits) (LLaDA's x0_p), not 1 (the cut
    distribution's), and every policy ranks as at temperature 0."""
    greedy = pick_ref(LOGITS, [MASK], 0.0, 1.0, policy, None, None)
    host = pick_ref(LOGITS, [MASK], 0.5, 1.0, policy, torch.Generator().manual_seed(0), None,
                    top_k=1)
    device = Picker([MASK], 5, 0.5, 1.0, policy, [0], "cpu", top_k=1)(LOGITS[None])
    for tok, conf, rank in (host, tuple(t[0] for t in device)):
        assert tok.tolist() == [0, 0, 0, 0]
        torch.testing.assert_close(conf, ROWS[:, 0])
        torch.testing.assert_close(rank, greedy[2])


@pytest.mark.parametrize("kind", [Picker, HostPicker])
def test_top_k_one_and_a_threshold_reveal_as_greedy_decoding(kind):
    """A block of four masked positions in four steps: at temperature 0.5 with top-k 1 the
    positions are revealed in greedy decoding's order (1, 3, 2, 0), and a threshold of 0.65
    reveals at the first step the two the model gives at least 0.65 (.9 and .7), not every
    position the tempered, cut distribution makes certain."""

    def revealed(temperature, top_k, threshold=None):
        seen = []

        def forward(tokens):
            seen.append((tokens[0] != MASK).nonzero()[:, 0].tolist())
            return LOGITS[None].clone()

        pick = kind([MASK], 5, temperature, 1.0, "confidence", [0], "cpu", top_k)
        Steps(forward, pick, 4, threshold).run(torch.full((1, 4), MASK),
                                               torch.ones(1, 4, dtype=torch.bool), 4)
        return seen[1:]

    assert revealed(0.0, 0) == [[1], [1, 3], [1, 2, 3]]
    assert revealed(0.5, 1) == revealed(0.0, 0)
    assert revealed(0.5, 1, 0.65) == [[1, 3], [1, 2, 3]]


def test_fsc_decode_top_k_one_by_block_diffusion_is_greedy(fsc_main):
    """At the command line, by block diffusion: --temperature 0.8 --top-k 1 (and a temperature
    near 0) decode the greedy tokens, revealed in the greedy order."""
    run = ["decode", "tiny_attn", "--prompt", "To be or not", "--length", "16", "--seed", "3",
           "--json"]

    def tokens(*extra):
        doc = json.loads(fsc_main(*run, *extra, check=0).stdout)
        assert doc["stats"]["mode"] == "diffusion" and doc["stats"]["K"] == 4
        return doc["token_ids"]

    greedy = tokens()
    assert len(set(greedy)) > 1  # (revealed in another order, these weights give other ids)
    assert tokens("--temperature", "0.8", "--top-k", "1") == greedy
    assert tokens("--temperature", "1e-5") == greedy


def test_decode_help_says_k_for_top_k_and_what_a_threshold_compares(fsc_main):
    """--top-k's count is k (K is the denoising steps); --threshold and --policy name the
    distribution they read."""
    said = " ".join(fsc_main("decode", "--help", check=0).stdout.split())
    assert "the k most likely tokens" in said and "the K most likely" not in said
    assert "at least this probability, in (0, 1] (at temperature 1, before top-k" in said


@pytest.mark.parametrize("kind", [Picker, HostPicker])
def test_a_threshold_no_position_reaches_reveals_as_the_even_schedule(kind):
    """Four positions in three steps: the even schedule reveals 1, 1, 2. A threshold only adds
    positions to it, so one that no position reaches (0.95) reveals 1, 1, 2 as well and a sweep
    of thresholds ends at the run without one; the minimum was ceil(masked / steps left), the
    front-loaded 2, 1, 1, another order at K not dividing G."""

    def revealed(threshold):
        seen = []

        def forward(tokens):
            seen.append((tokens[0] != MASK).nonzero()[:, 0].tolist())
            return LOGITS[None].clone()

        pick = kind([MASK], 5, 0.0, 1.0, "confidence", [0], "cpu")
        steps = Steps(forward, pick, 3, threshold)
        out = steps.run(torch.full((1, 4), MASK), torch.ones(1, 4, dtype=torch.bool), 4)
        return seen[1:], out.tolist(), steps.used

    assert revealed(0.95) == revealed(None)
    assert revealed(None)[0] == [[1], [1, 3]]
    assert revealed(0.65)[0] == [[1, 3], [1, 2, 3]]  # .9 and .7 reach it: ahead, then one a step
