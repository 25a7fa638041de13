"""Prompts decoded together (fsc.decode.generate_batch) give what each gives alone: every mixer, block
diffusion and AR, greedy and sampled (each row its own seed), prompts of several lengths in
one batch (padding never reaching an SSM's state or an attention's keys)."""

import pytest
import torch
from model_checks import sharp_model

from fsc.decode import DecodeConfig, batches, generate, generate_batch
from fsc.errors import UsageError
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()
TEXTS = ["Once upon", "The king ", "Hi", "To be or ", "Now is th"]


_model = sharp_model  # sharper logits so greedy choices are not near-ties (model_checks)


def test_rows_go_in_order_or_by_prompt_length():
    prompts = [[1] * 9, [1] * 9, [1] * 2, [1] * 9, [1] * 9]
    assert batches(prompts, 2) == [[0, 1], [2, 3], [4]]
    assert batches(prompts, 2, ragged=False) == [[0, 1], [3, 4], [2]]  # a sliding window's


@pytest.mark.parametrize("name", ["tiny_hybrid"] + [
    pytest.param(n, marks=pytest.mark.slow)  # make test: the hybrid (attention, Mamba-2, MoE)
    for n in ("tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_gated_delta")])
@pytest.mark.parametrize("mode, temperature", [("diffusion", 0.0), ("ar", 0.0),
                                               ("diffusion", 1.0)])
def test_each_row_decodes_as_alone(name, mode, temperature):
    m = _model(name)
    cfg = DecodeConfig(length=10, G=4, steps=2, mode=mode, temperature=temperature,
                       policy="random" if temperature else "confidence")
    prompts = [TOK.encode(t) for t in TEXTS]
    seeds = [11, 12, 13, 14, 15]
    together = generate_batch(m, TOK, prompts, cfg, seeds=seeds, batch=3)
    for p, s, res in zip(prompts, seeds, together):
        alone = generate(m, TOK, p, DecodeConfig(**{**cfg.__dict__, "seed": s}))
        assert res.token_ids == alone.token_ids
        assert res.stats["prompt_tokens"] == len(p) and res.stats["tokens"] == len(alone.token_ids)
    assert [r.stats["batch"] for r in together] == [3, 3, 3, 2, 2]  # lengths 9, 9, 2, 9, 9


def test_bad_batches_are_refused():
    m = _model("tiny_attn")
    cfg = DecodeConfig(length=4, G=4, steps=2)
    with pytest.raises(UsageError, match="--batch 0"):
        generate_batch(m, TOK, [[1, 2]], cfg, batch=0)
    with pytest.raises(UsageError, match="empty"):
        generate_batch(m, TOK, [[1, 2], []], cfg)


def test_a_rows_counts_are_its_own():
    m = _model("tiny_hybrid")
    cfg = DecodeConfig(length=10, G=4, steps=2)
    prompts = [TOK.encode(t) for t in TEXTS[:2]]
    for res, p in zip(generate_batch(m, TOK, prompts, cfg, batch=2), prompts):
        alone = generate(m, TOK, p, cfg).stats
        for key in ("tokens", "blocks", "steps_used", "forward_passes", "prompt_passes"):
            assert res.stats[key] == alone[key], key
        assert res.stats["batch"] == 2


def test_a_sliding_window_decodes_a_batch_per_length():
    """Its ring cannot be right-aligned: rows of one length share a batch, and each row still
    decodes as alone."""
    from fsc.recipe import parse_recipe

    data = load_recipe("tiny_hybrid").model_dump(mode="json", exclude_none=True)
    data["attention"]["window"] = 6
    m = build_model(parse_recipe(data), seed=5).eval()
    with torch.no_grad():
        m.lm_head.weight.mul_(20)
    cfg = DecodeConfig(length=8, G=4, steps=2)
    prompts = [TOK.encode(t) for t in TEXTS]
    together = generate_batch(m, TOK, prompts, cfg, batch=3)
    assert [r.stats["batch"] for r in together] == [3, 3, 1, 3, 1]
    for p, res in zip(prompts, together):
        assert res.token_ids == generate(m, TOK, p, cfg).token_ids


@pytest.mark.parametrize("sampler", ["host", "device"])
@pytest.mark.parametrize("temperature, policy", [(1.0, "confidence"), (0.0, "random")])
def test_a_row_whose_block_is_done_first_draws_as_alone(sampler, temperature, policy):
    """With a threshold the rows of a batch finish a block after different numbers of steps; a
    row done first takes no more draws while its batch-mates step on, so its next blocks
    sample (or, with the random order, reveal) as alone, and its counts are its own."""
    m = _model("tiny_attn")
    cfg = DecodeConfig(length=12, G=4, steps=4, temperature=temperature, policy=policy,
                       threshold=0.5, sampler=sampler)
    prompts = [TOK.encode(t) for t in ["Once upon", "The king ", "To be or ", "Now is th"]]
    seeds = [11, 12, 13, 14]
    together = generate_batch(m, TOK, prompts, cfg, seeds=seeds, batch=4)
    alone = [generate(m, TOK, p, DecodeConfig(**{**cfg.__dict__, "seed": s}))
             for p, s in zip(prompts, seeds)]
    assert len({a.stats["steps_used"] for a in alone}) > 1  # rows that finish apart
    for res, one in zip(together, alone):
        assert res.token_ids == one.token_ids
        for key in ("steps_used", "steps_per_block", "forward_passes", "prompt_passes"):
            assert res.stats[key] == one.stats[key], key
