"""A transformers model as the scorer (the MDLM / BD3-LM convention), with its own tokenizer:
the Gen-PPL fsc reports equals the perplexity transformers computes for the same text."""

import json
import math

import pytest
import torch

from fsc.eval import genppl
from fsc.eval.grid import EvalGrid, EvalSettings, GenSettings
from fsc.tokenizer import ByteTokenizer

transformers = pytest.importorskip("transformers")

CHARS = [chr(i) for i in range(128)] + ["\ufffd"]  # what fsc's byte text decodes to


def _char_tokenizer(folder):
    """A character-level tokenizer (ids 0..128, then <s> and </s>), saved as transformers
    saves one: not fsc's byte tokenizer, so the samples are retokenized."""
    from tokenizers import Tokenizer, decoders, models

    vocab = {c: i for i, c in enumerate(CHARS)}
    vocab["<s>"], vocab["</s>"] = len(CHARS), len(CHARS) + 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.decoder = decoders.Fuse()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                                eos_token="</s>")
    fast.save_pretrained(folder)


@pytest.fixture
def hf_scorer(tmp_path):
    from tests.imports.published import save_published

    folder = save_published("llama", tmp_path / "llama", seed=3, vocab_size=len(CHARS) + 2)
    _char_tokenizer(folder)
    return folder


@pytest.mark.slow  # transformers builds and saves a model: seconds (make test-slow)
def test_hf_genppl_equals_transformers_perplexity(fsc_main, tmp_path, hf_scorer):
    res = fsc_main("eval", "tiny_hybrid", "--task", "genppl", "--data", "shakespeare",
                   "--samples", "3", "--lengths", "12", "--prompt-length", "8", "--steps", "4",
                   "--scorer", hf_scorer, "--store", tmp_path / "st", "--json", check=0)
    ref, decoded = json.loads(res.stdout)["rows"]
    tok = transformers.AutoTokenizer.from_pretrained(hf_scorer)
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_scorer).eval()
    grid = EvalGrid("x", "x", "x", 4, 4, "genppl", (12,), (), (), EvalSettings(
        "diffusion", 4, 3, 3, 0, None), None, "shakespeare", None, None,
        GenSettings((), 8, str(hf_scorer)))
    nll, count = 0.0, 0
    for prompt, cont in genppl.draws(grid, genppl.text_tokens(grid, ByteTokenizer(), 12), 12):
        ctx = tok.encode(bytes(prompt).decode())  # as the tokenizer begins a text
        new = tok.encode(bytes(cont).decode(), add_special_tokens=False)
        ids = torch.tensor([ctx + new])
        labels = ids.clone()
        labels[0, : len(ctx)] = -100
        with torch.no_grad():
            loss = model(input_ids=ids, labels=labels).loss  # mean NLL of the continuation
        nll += float(loss) * len(new)
        count += len(new)
    assert ref["gen_ppl"] == pytest.approx(math.exp(nll / count), rel=1e-4)
    assert ref["scored_tokens"] == count
    assert decoded["gen_ppl"] > 0 and decoded["scorer"] == str(hf_scorer)
    # a sample that joined bytes into a character the scorer lacks is counted, and said
    assert ref["uncarried"] == 0 and decoded["uncarried"] == 1
    assert "1 sample held text the scorer's tokenizer drops" in " ".join(
        fsc_main("eval", "tiny_hybrid", "--task", "genppl", "--data", "shakespeare",
                 "--samples", "3", "--lengths", "12", "--prompt-length", "8", "--steps", "4",
                 "--scorer", hf_scorer, "--store", tmp_path / "st2", check=0).stderr.split())
