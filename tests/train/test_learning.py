"""A tiny attention model learns passkey retrieval with the frontier objective (`make test-slow`;
`make test` keeps the shorter copy-task learning check in test_train.py):
trained by `fsc train` until an in-loop eval reaches 0.95 exact (1,500 steps, about
30 s of one CPU thread here), then scored by `fsc eval` on prompts it never saw; and `fsc decode`
of a passkey prompt gives the tokens `fsc eval` decodes (one BOS convention)."""

import json

import pytest
import torch
from fsc_run import in_process

from fsc.checkpoint.io import load_checkpoint
from fsc.data.tasks import Passkey
from fsc.eval.retrieval import decode_answers
from fsc.seeds import derive
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()
RECIPE = """\
name: passkey_learner
d_model: 32
n_layers: 2
vocab_size: 260
block_size: 4
dtype: fp32
state_dtype: fp32
layers:
  default: attention
attention: {n_heads: 4, n_kv_heads: 4, head_dim: 8}
mlp: {hidden_ratio: 2}
"""
L = 104  # the shortest passkey prompt with a 4-digit key (100 tokens) and room to move it
STEPS = 3000  # the most; --stop-at ends it at 1,500

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(training directory, `fsc train --json` summary)."""
    root = tmp_path_factory.mktemp("learning")
    (root / "recipe.yaml").write_text(RECIPE)
    res = in_process("train", root / "recipe.yaml", "--data", "passkey", "--seq-len", L,
                     "--train-steps", STEPS, "--batch", 16, "--lr", "1e-2", "--warmup", 50,
                     "--weighting", "masked", "--supervise-needle", "--eval-every", 100,
                     "--log-every", 100, "--stop-at", "0.95", "--seed", 1,
                     "--out", root / "run", "--store", root / "store", "--json", check=0)
    return root, json.loads(res.stdout)


def test_a_tiny_model_learns_passkey(trained):
    """It starts at chance (no whole key right), reaches 0.95 in the loop within STEPS, and
    `fsc eval` finds the key in ≥ 90 % of 60 new prompts at three needle depths."""
    root, doc = trained
    assert doc["evals"][0]["accuracy"] <= 0.25 and doc["evals"][0]["step"] == 100
    assert doc["reached"], doc["evals"]
    res = in_process("eval", root / "run", "--depths", "0,0.5,1", "--lengths", L,
                     "--samples", 20, "--seed", 7, "--store", root / "store", "--json", check=0)
    rows = json.loads(res.stdout)["rows"]
    assert [r["length_ratio"] for r in rows] == [1.0] * 3
    assert sum(r["correct"] for r in rows) / sum(r["n"] for r in rows) >= 0.9, rows


def test_decode_gives_the_answer_eval_decodes(trained, fsc_main):
    """`fsc decode CKPT --prompt "<passkey prompt>"` (no BOS: the checkpoint records none)
    gives the answer tokens of eval's batched decoder, and they are the key."""
    _, doc = trained
    ckpt = doc["checkpoint"]
    _, model = load_checkpoint(ckpt)
    task = Passkey(TOK, L, 4)
    samples = [task.sample(derive(11, i), depth=i / 3) for i in range(4)]
    first = samples[0].target.index(True)
    tokens = torch.tensor([s.ids for s in samples])
    evaluated = decode_answers(model, TOK, tokens, torch.tensor(samples[0].target),
                               "diffusion", 4)
    keys = 0
    for s, row in zip(samples, evaluated.tolist()):
        res = fsc_main("decode", ckpt, "--prompt", TOK.decode(s.ids[:first]), "--length", 4,
                       "--json", check=0)
        doc = json.loads(res.stdout)
        assert doc["stats"]["prompt_tokens"] == first  # no BOS before the prompt
        assert doc["token_ids"] == row[first:]
        keys += doc["token_ids"] == s.ids[first:]
    assert keys >= 3
