"""fsc decode's stats: the device it ran on (auto by default, as fsc profile), the prefill timed
apart from the generation, and a warm-up timed apart where one is made."""

import json

import pytest
import torch

from fsc.decode import DecodeConfig, engine, generate
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer


def test_stats_time_the_prefill_apart_on_the_auto_device(fsc_main):
    res = fsc_main("decode", "tiny_hybrid", "--prompt", "Once upon", "--length", "8", "--json",
                   check=0)
    s = json.loads(res.stdout)["stats"]
    assert s["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert s["prompt_tokens"] == 9 and s["prefill_s"] > 0 and s["generate_s"] > 0
    assert s["seconds"] == pytest.approx(s["prefill_s"] + s["generate_s"])
    assert s["tokens_per_s"] == pytest.approx(s["tokens"] / s["generate_s"])  # generation alone
    assert s["prompt_tokens_per_s"] == pytest.approx(9 / s["prefill_s"])
    if s["device"] == "cpu":
        assert s["warmup_s"] is None  # nothing to warm up on the CPU
    text = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--mode", "ar",
                    "--device", "cpu", check=0).stdout
    assert "cached, cpu)" in text and "prompt: 2 tokens folded in " in text


def test_uncached_there_is_no_prefill_rate(fsc_main):
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--no-cache",
                   "--device", "cpu", "--json", check=0)
    assert json.loads(res.stdout)["stats"]["prompt_tokens_per_s"] is None


def test_the_first_decode_of_a_model_warms_up_once(monkeypatch):
    """Where a device warms up (CUDA; here the CPU stands in), the first decode of a model at a
    G times a warm-up apart; the next one makes none, and both decode the same tokens."""
    monkeypatch.setattr(engine, "WARMS_UP", ("cpu",))
    monkeypatch.setattr(engine, "_warm", set())
    tok = ByteTokenizer()
    model = build_model(load_recipe("tiny_hybrid"), seed=0).eval()
    cfg = DecodeConfig(length=6, G=4, steps=2)
    first, second = (generate(model, tok, tok.encode("abc"), cfg) for _ in range(2))
    assert first.stats["warmup_s"] > 0 and second.stats["warmup_s"] is None
    assert first.token_ids == second.token_ids
