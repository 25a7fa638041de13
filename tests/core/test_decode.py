import pytest
import torch

from fsc.decode import DecodeConfig, even_schedule, generate, sample
from fsc.errors import UsageError
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def _gen(name, **kw):
    m = build_model(load_recipe(name), seed=5).eval()
    with torch.no_grad():  # sharper logits so greedy choices are not near-ties
        m.lm_head.weight.mul_(20)
    cfg = DecodeConfig(**{"length": 13, "G": 4, "steps": 2, "seed": 1, **kw})
    return generate(m, TOK, [TOK.bos_id] + TOK.encode("Hi there"), cfg)


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
    # prompt 9 tokens folds as 3 blocks; 3 generated blocks × (2 steps + 1 fold)
    assert r.stats["blocks"] == 3 and r.stats["prompt_passes"] == 3
    assert r.stats["forward_passes"] == 3 + 3 * 3


def test_threshold_reveals_early():
    r = _gen("tiny_hybrid", length=8, G=4, steps=4, threshold=1e-9)
    assert r.stats["forward_passes"] == 3 + 2 * 2  # every position revealed at the first step


def test_schedule_and_top_p():
    assert even_schedule(32, 8) == [4] * 8 and sum(even_schedule(7, 3)) == 7
    logits = torch.tensor([[5.0, 4.0, -10.0, -10.0]])
    toks = {int(sample(logits, 1.0, 0.5, torch.Generator().manual_seed(s))[0]) for s in range(20)}
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
