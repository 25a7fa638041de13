"""fsc decode's stats: the device it ran on (auto by default, as fsc profile), the prefill timed
apart from the generation, and a warm-up timed apart where one is made."""

import json

import pytest
import torch

from fsc.decode import DecodeConfig, engine, generate
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.text import counted
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
    stats = json.loads(res.stdout)["stats"]
    assert stats["prompt_tokens_per_s"] is None
    # nothing is folded ahead: no prefill time (it was the set-up's few microseconds), and
    # the whole time is generation
    assert stats["prefill_s"] == 0 and stats["seconds"] == stats["generate_s"]


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


def test_the_text_output_splits_the_generation_from_the_prompt(fsc_main):
    """The line under the text is the generation alone (its tokens, seconds, tokens/s and
    forward passes); the next is the prompt's fold, with its own passes: together the stats'
    forward_passes."""
    run = ("decode", "tiny_attn", "--prompt", "Once upon a time", "--length", "6",
           "--prefill-chunk", "4", "--device", "cpu")
    s = json.loads(fsc_main(*run, "--json", check=0).stdout)["stats"]
    text = " ".join(fsc_main(*run, check=0).stdout.split())
    assert s["prompt_passes"] == 4  # 16 prompt tokens, 4 a pass
    generated = s["forward_passes"] - s["prompt_passes"]
    assert f"{s['tokens']} tokens generated in " in text
    assert (f"tok/s): {counted(s['blocks'], 'block')}, {generated} forward passes (diffusion, "
            in text)
    assert "prompt: 16 tokens folded in " in text and "tok/s), 4 forward passes" in text


def test_uncached_stats_have_the_batch_fields_of_a_batch_of_one(fsc_main):
    run = ("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--device", "cpu", "--json")
    cached, uncached = (json.loads(fsc_main(*run, *more, check=0).stdout)["stats"]
                        for more in ((), ("--no-cache",)))
    assert set(uncached) == set(cached)
    assert uncached["batch"] == 1 and uncached["batch_index"] == 0
    assert uncached["batch_forward_passes"] == uncached["forward_passes"]
    assert uncached["batch_prompt_passes"] == uncached["prompt_passes"] == 0


@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_the_prefill_is_waited_for_before_the_generation_is_timed(monkeypatch, mode):
    """CUDA runs a prefill's kernels after Python has queued them: the decoder waits for them
    (engine.synchronize, a no-op off CUDA) after the prefill and before the first step or
    fold, so that `prefill_s` is the prefill's time and none of it lands in `generate_s`."""
    events = []

    def recorded(name, fn):
        return lambda *a, **kw: (events.append(name), fn(*a, **kw))[1]

    model = build_model(load_recipe("tiny_attn"), seed=0).eval()
    monkeypatch.setattr(model, "fold_blocks", recorded("prefill", model.fold_blocks))
    monkeypatch.setattr(model, "forward", recorded("step", model.forward))
    monkeypatch.setattr(model, "fold", recorded("fold", model.fold))
    monkeypatch.setattr(engine, "synchronize", recorded("sync", lambda device: None))
    tok = ByteTokenizer()
    cfg = DecodeConfig(length=6, G=1 if mode == "ar" else 4, steps=0 if mode == "ar" else 2,
                       mode=mode)
    generate(model, tok, tok.encode("Once upon"), cfg)
    assert events[:2] == ["prefill", "sync"] and events[2] in ("step", "fold")
