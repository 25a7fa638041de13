import json

import pytest
import torch
from model_checks import decode_tiny

from fsc.decode.denoise import even_schedule
from fsc.decode.sampler import distribution, pick_ref, priority
from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


_gen = decode_tiny  # a sharpened tiny model decoded after "Hi there" (tests/model_checks.py)


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_hybrid"])
@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_greedy_same_tokens_with_and_without_cache(name, mode):
    a = _gen(name, mode=mode, temperature=0.0)
    b = _gen(name, mode=mode, temperature=0.0, use_cache=False)
    assert a.token_ids == b.token_ids
    assert len(a.token_ids) == 13 and a.stats["tokens"] == 13
    assert a.stats["cached"] and not b.stats["cached"]


def test_sampling_is_seeded_and_cache_independent():
    a = _gen("tiny_hybrid", temperature=0.9, top_p=0.9)
    b = _gen("tiny_hybrid", temperature=0.9, top_p=0.9, use_cache=False)
    c = _gen("tiny_hybrid", temperature=0.9, top_p=0.9, seed=2)
    assert a.token_ids == b.token_ids and a.token_ids != c.token_ids


def test_diffusion_pass_counts():
    r = _gen("tiny_hybrid", length=12, G=4, steps=2)
    # prompt 9 tokens folds as 3 blocks in one pass; 3 generated blocks × 2 steps, and a
    # fold after each but the last
    assert r.stats["blocks"] == 3 and r.stats["prompt_passes"] == 1
    assert r.stats["forward_passes"] == 1 + 3 * 2 + 2


def test_threshold_reveals_early():
    r = _gen("tiny_hybrid", length=8, G=4, steps=4, threshold=1e-9)
    assert r.stats["forward_passes"] == 1 + 2 + 1  # every position revealed at the first step


def test_schedule_and_top_p():
    assert even_schedule(32, 8) == [4] * 8 and sum(even_schedule(7, 3)) == 7
    logits = torch.tensor([[5.0, 4.0, -10.0, -10.0]])
    toks = {int(pick_ref(logits, [], 1.0, 0.5, "confidence", torch.Generator().manual_seed(s),
                         None)[0]) for s in range(20)}
    assert toks == {0}


def test_no_mask_or_special_tokens_generated():
    r = _gen("tiny_hybrid", temperature=2.0, length=16)
    assert all(t < 256 or t == TOK.eos_id for t in r.token_ids)


@pytest.mark.parametrize("kw, msg", [
    ({"steps": 5}, "steps 5 must be between 1 and G"),
    ({"mode": "beam"}, "mode 'beam'"),
    ({"length": 0}, "length 0"),
    ({"top_p": 0.0}, "top_p"),
])
def test_bad_decode_settings(kw, msg):
    with pytest.raises(UsageError, match=msg):
        _gen("tiny_attn", **kw)


@pytest.mark.parametrize("policy", ["confidence", "random", "margin", "entropy"])
@pytest.mark.parametrize("threshold", [None, 0.02])
def test_every_policy_keeps_the_cache_exact(policy, threshold):
    """Sampled, seeded: the cached decoder writes what the uncached one does, whatever the
    policy reveals first and however many steps the threshold takes."""
    kw = dict(temperature=1.0, policy=policy, threshold=threshold, length=12, steps=4)
    a, b = _gen("tiny_hybrid", **kw), _gen("tiny_hybrid", **kw, use_cache=False)
    assert a.token_ids == b.token_ids and a.stats["steps_used"] == b.stats["steps_used"]
    assert a.stats["policy"] == policy


def test_the_other_mixers_stay_exact_under_a_threshold_and_random_order():
    for name in ("tiny_attn", "tiny_mamba"):
        kw = dict(temperature=1.0, policy="random", threshold=0.05, length=8, steps=4)
        assert _gen(name, **kw).token_ids == _gen(name, **kw, use_cache=False).token_ids


def test_the_threshold_adapts_the_steps():
    loose = _gen("tiny_hybrid", length=8, G=4, steps=4, threshold=1e-9)
    assert loose.stats["steps_per_block"] == 1  # everything at the first step
    strict = _gen("tiny_hybrid", length=8, G=4, steps=4, threshold=1.0, temperature=1.0)
    assert strict.stats["steps_per_block"] == 4  # nothing sure: one a step
    capped = _gen("tiny_hybrid", length=8, G=4, steps=2, threshold=1.0, temperature=1.0)
    assert capped.stats["steps_per_block"] == 2  # K < G: still within K steps
    plain = _gen("tiny_hybrid", length=8, G=4, steps=2)
    assert plain.stats["steps_per_block"] == 2 and plain.stats["steps_used"] == 4


def test_random_order_is_seeded():
    a = _gen("tiny_hybrid", policy="random", temperature=0.0, length=12, steps=4)
    b = _gen("tiny_hybrid", policy="random", temperature=0.0, length=12, steps=4)
    c = [_gen("tiny_hybrid", policy="random", temperature=0.0, length=12, steps=4, seed=s)
         for s in range(2, 6)]
    assert a.token_ids == b.token_ids
    assert any(r.token_ids != a.token_ids for r in c)  # another order, another greedy text


def test_the_random_order_leaves_the_samples_alone(fsc_main):
    """--policy random orders from a stream of its own: at K = 1 one step reveals the whole
    block, so its samples are confidence's; at K = G its order (and so its text) is not."""

    def decoded(policy: str, steps: int) -> list[int]:
        res = fsc_main("decode", "tiny_attn", "--prompt", "x", "--length", "16", "--steps",
                       str(steps), "--temperature", "1", "--seed", "3", "--policy", policy,
                       "--json")
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)["token_ids"]

    assert decoded("random", 1) == decoded("confidence", 1)
    assert decoded("random", 4) != decoded("confidence", 4)


def test_the_policies_rank_by_their_score():
    probs = distribution(torch.log(torch.tensor([
        [0.50, 0.49, 0.01],    # confident, no margin, high entropy
        [0.40, 0.10, 0.50],    # top 0.5, margin 0.1
        [0.90, 0.05, 0.05]])), 1.0, 1.0)  # sure: best by every measure
    conf = probs.max(-1).values
    assert priority(probs, conf, "confidence", None).argsort(descending=True).tolist() == [2, 0, 1]
    assert priority(probs, conf, "margin", None).argsort(descending=True).tolist() == [2, 1, 0]
    ent = priority(probs, conf, "entropy", None)
    assert ent.argmax() == 2 and ent[1] < ent[2] and ent.dtype == torch.float64
    gen = torch.Generator().manual_seed(0)
    r = priority(probs, conf, "random", torch.rand(3, generator=gen, dtype=torch.float64))
    assert r.shape == (3,) and 0 <= float(r.min()) < 1


def test_sampling_draws_in_float64():
    logits = torch.tensor([[0.0, 40.0, 40.0 + 1e-6]], dtype=torch.float32)
    assert distribution(logits, 1.0, 1.0).dtype == torch.float64
    tok, conf, _ = pick_ref(logits, [], 1.0, 1.0, "confidence", torch.Generator().manual_seed(0),
                            None)
    assert conf.dtype == torch.float64 and int(tok) in (1, 2)
    # a token of probability e^-120 (zero in float32, which ends at about 1e-45) keeps its mass
    far = torch.tensor([[0.0, 120.0]], dtype=torch.float32)
    assert torch.softmax(far, -1)[0, 0] == 0 and distribution(far, 1.0, 1.0)[0, 0] > 0


@pytest.mark.parametrize("name", ["tiny_hybrid"] + [
    pytest.param(n, marks=pytest.mark.slow)  # make test: the hybrid (attention, Mamba-2, MoE)
    for n in ("tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_gated_delta")])
def test_the_device_pick_decodes_the_host_picks_greedy_tokens(name):
    """The pick on the logits' device (what CUDA runs) against the host reference, through the
    decoder, for every mixer; sampled, it is reproducible per seed and exact cached vs not."""
    for policy, threshold in (("confidence", None), ("margin", 0.5)):
        host = _gen(name, temperature=0.0, policy=policy, threshold=threshold, sampler="host")
        dev = _gen(name, temperature=0.0, policy=policy, threshold=threshold, sampler="device")
        assert dev.token_ids == host.token_ids
    assert _gen(name, mode="ar", sampler="device").token_ids == _gen(name, mode="ar").token_ids
    hot = {"temperature": 1.0, "policy": "random", "sampler": "device"}
    first = _gen(name, **hot).token_ids
    assert _gen(name, **hot).token_ids == first == _gen(name, use_cache=False, **hot).token_ids


def test_a_block_with_nothing_masked_takes_no_step_and_no_draw():
    from fsc.decode.denoise import Steps
    from fsc.decode.sampler import Picker

    def forward(tokens):
        raise AssertionError("a forward pass for a block with nothing to fill")

    pick = Picker([], 8, 1.0, 1.0, "random", [3], "cpu")
    before = [g.get_state() for g in pick.gens + pick.orders]
    block = torch.tensor([[1, 2, 3, 4]])
    steps = Steps(forward, pick, 4)
    out = steps.run(block, torch.zeros(1, 4, dtype=torch.bool))
    assert torch.equal(out, block) and steps.used == [0]
    assert all(torch.equal(g.get_state(), s) for g, s in zip(pick.gens + pick.orders, before))
