"""The repetition penalty (`DecodeConfig.repetition_penalty`, `fsc decode --repetition-penalty`,
a harness request's or generation_config.json's `repetition_penalty`): every id already in the
prompt or generated is made less likely as transformers makes it, in greedy decoding too; the
cached decoder, its uncached reference and both pickers agree, and a batch's rows keep their
own histories."""

import json

import pytest
import torch
from model_checks import sharp_model

from fsc.decode import DecodeConfig, generate, generate_batch
from fsc.decode.sampler import banned_ids, penalize
from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer, stop_ids

TOK = ByteTokenizer()
PROMPT = [TOK.bos_id] + TOK.encode("Hi there")


def test_penalize_divides_positive_and_multiplies_negative_logits_of_seen_ids():
    logits = torch.tensor([[2.0, -2.0, 3.0, -1.0]])
    seen = torch.tensor([[True, True, False, False]])
    assert penalize(logits, seen, 2.0).tolist() == [[1.0, -4.0, 3.0, -1.0]]
    assert penalize(logits, None, 2.0) is logits


def test_penalize_is_transformers_repetition_penalty():
    processors = pytest.importorskip("transformers.generation.logits_process")
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, generator=g)
    ids = torch.randint(0, 50, (3, 12), generator=g)
    want = processors.RepetitionPenaltyLogitsProcessor(1.3)(ids, logits.clone())
    seen = torch.zeros(3, 50, dtype=torch.bool).scatter(1, ids, True)
    assert torch.equal(penalize(logits, seen, 1.3), want)


def _by_hand(model, prompt: list[int], n: int, penalty: float) -> list[int]:
    """Greedy next-token decoding by full forward passes, the penalty applied id by id: what
    the decoder must give, written without it."""
    vocab = model.recipe.vocab_size
    banned, stops = banned_ids(TOK, vocab), stop_ids(TOK)
    ids, out = list(prompt), []
    with torch.no_grad():
        for _ in range(n):
            x = torch.tensor([ids])
            logits = model.forward_blockwise(x, [1] * len(ids))[0, -1].float().clone()
            for i in set(ids):
                logits[i] = logits[i] * penalty if logits[i] < 0 else logits[i] / penalty
            logits[banned] = float("-inf")
            out.append(int(logits.argmax()))
            ids.append(out[-1])
            if out[-1] in stops:
                break
    return out


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_mamba"])
def test_greedy_ar_decoding_penalizes_every_id_seen(name):
    m = sharp_model(name)
    plain = generate(m, TOK, PROMPT, DecodeConfig(length=24, G=1, steps=1, mode="ar")).token_ids
    cfg = DecodeConfig(length=24, G=1, steps=1, mode="ar", repetition_penalty=1.8)
    got = generate(m, TOK, PROMPT, cfg).token_ids
    assert got == _by_hand(m, PROMPT, 24, 1.8)
    assert got != plain  # (a penalty that did nothing would pass the line above only by luck)
    assert generate(m, TOK, PROMPT, DecodeConfig(**{**cfg.__dict__, "use_cache": False})
                    ).token_ids == got
    assert generate(m, TOK, PROMPT, DecodeConfig(**{**cfg.__dict__, "sampler": "device"})
                    ).token_ids == got


@pytest.mark.parametrize("mode, temperature", [("diffusion", 0.0), ("ar", 0.0),
                                               ("diffusion", 1.0)])
def test_cached_uncached_host_device_and_batched_agree(mode, temperature):
    """Under a penalty: the cached decoder equals its uncached reference (greedy), the device
    picker the host's (greedy), and each row of a batch of prompts of several lengths decodes
    as alone (its own prompt's ids penalized, not its batch-mates')."""
    m = sharp_model("tiny_hybrid")
    cfg = DecodeConfig(length=10, G=4, steps=2, mode=mode, temperature=temperature,
                       repetition_penalty=1.5)
    prompts = [TOK.encode(t) for t in ("Once upon", "Hi", "To be or ")]
    together = generate_batch(m, TOK, prompts, cfg, seeds=[3, 4, 5], batch=3)
    for p, s, res in zip(prompts, (3, 4, 5), together):
        alone = generate(m, TOK, p, DecodeConfig(**{**cfg.__dict__, "seed": s}))
        assert res.token_ids == alone.token_ids
        if temperature == 0:
            for other in ({"use_cache": False}, {"sampler": "device"}):
                assert generate(m, TOK, p, DecodeConfig(**{**cfg.__dict__, **other})
                                ).token_ids == alone.token_ids, other
    plain = generate_batch(m, TOK, prompts, DecodeConfig(**{**cfg.__dict__,
                                                           "repetition_penalty": 1.0}),
                           seeds=[3, 4, 5], batch=3)
    assert [r.token_ids for r in plain] != [r.token_ids for r in together]


@pytest.mark.parametrize("penalty", [0.0, -1.0, float("nan")])
def test_a_penalty_not_above_zero_is_refused(penalty):
    with pytest.raises(UsageError, match="repetition penalty"):
        DecodeConfig(length=4, G=4, steps=4, repetition_penalty=penalty).check()


def test_fsc_decode_repetition_penalty_at_the_command_line(fsc_main):
    def tokens(*extra):
        res = fsc_main("decode", "tiny_mamba", "--mode", "ar", "--prompt", "Hi there",
                       "--length", "24", "--json", *extra)
        return json.loads(res.stdout)["token_ids"]

    penalized = tokens("--repetition-penalty", "1.8")
    assert penalized != tokens()
    assert penalized == tokens("--repetition-penalty", "1.8", "--no-cache")
    res = fsc_main("decode", "tiny_mamba", "--repetition-penalty", "0", check=2)
    assert "--repetition-penalty" in res.stderr and "> 0" in res.stderr
    assert "Traceback" not in res.stderr


def test_the_seen_ids_are_marked_in_the_tensor_a_capture_reads():
    """A CUDA graph replays the pick on the addresses it captured: `saw` must mark the ids in
    place, and what the pick reads must be a view of that tensor (the stand-in replay of
    tests/core/test_graphs.py reads the attribute afresh, so it would not see a new tensor)."""
    from fsc.decode.sampler import History

    history = History(1.5, [[1, 2], []], 10, "cpu")
    where = history.seen.data_ptr()
    read = history.against(torch.zeros(2, 3, 10))  # as Picker.choose reads it
    history.saw(torch.tensor([[3, 4], [5, 5]]))
    assert history.seen.data_ptr() == where and read.data_ptr() == where
    assert read[:, 0].nonzero().tolist() == [[0, 1], [0, 2], [0, 3], [0, 4], [1, 5]]
