"""genppl against the reference code of MDLM and BD3-LM, and MAUVE against its package: the
reference row reads each continuation as a sample is read (up to its first EOS), a scorer with
fewer positions than a prompt and sample reads them in BD3-LM's sliding windows, and MAUVE
quantizes with the package's own bucket count. Each number recomputed here by hand."""

import json
import math

import numpy as np
import pytest
import torch

from fsc.data.sources import DataOptions
from fsc.eval import genppl
from fsc.eval.grid import EvalGrid, EvalSettings, GenSettings
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer, stop_ids


def _grid(data, prompt_length=8, length=12):
    return EvalGrid("x", "x", "x", 4, 4, "genppl", (length,), (), (),
                    EvalSettings("diffusion", 4, 3, 3, 0, None), None, str(data),
                    DataOptions(), None, GenSettings((), prompt_length, "unused"))


def _reference_row(fsc_main, tmp_path, data, scorer):
    res = fsc_main("eval", "tiny_hybrid", "--task", "genppl", "--data", data, "--samples", "3",
                   "--lengths", "12", "--prompt-length", "8", "--steps", "4", "--scorer",
                   scorer, "--store", tmp_path / "st", "--json", check=0)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["rows"][0]


def test_the_reference_row_is_read_up_to_its_eos_as_samples_are(fsc_main, tmp_path, ar_recipe):
    """In a file of documents a drawn continuation may run into the next document: it is cut
    at its EOS, as a sample is, and the EOS is not scored."""
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": f"doc {i} says hi."}) + "\n" for i in range(200)))
    ref = _reference_row(fsc_main, tmp_path, docs, ar_recipe)
    tok = ByteTokenizer()
    eos = stop_ids(tok)
    grid = _grid(docs)
    scorer = build_model(load_recipe(ar_recipe), seed=0).eval()
    nll, count, cut = 0.0, 0, 0
    for prompt, cont in genppl.draws(grid, genppl.text_tokens(grid, tok, 12), 12):
        kept = cont[: next((i for i, t in enumerate(cont) if t in eos), len(cont))]
        cut += len(kept) < len(cont)
        ids = torch.tensor([prompt + kept])
        with torch.no_grad():
            logits = scorer.forward_blockwise(ids, [1] * ids.shape[1])[0].double()
        logp = torch.log_softmax(logits, -1)[len(prompt) - 1 : -1]
        nll -= float(logp.gather(-1, torch.tensor(kept)[:, None]).sum())
        count += len(kept)
    assert cut >= 1  # the draw crosses a document's end
    assert ref["scored_tokens"] == count and ref["ended_early"] == cut
    assert ref["gen_ppl"] == pytest.approx(math.exp(nll / count), rel=1e-9)


def _gpt2(folder, n_positions):
    """A tiny GPT-2 (absolute positions: it cannot read past n_positions) with a character
    tokenizer, so samples are retokenized one character a token."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models

    chars = [chr(i) for i in range(128)] + ["\ufffd"]
    vocab = {c: i for i, c in enumerate(chars)} | {"<|endoftext|>": len(chars)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.decoder = decoders.Fuse()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    ).save_pretrained(folder)
    config = transformers.GPT2Config(vocab_size=len(vocab), n_positions=n_positions, n_embd=32,
                                     n_layer=2, n_head=2, bos_token_id=len(chars),
                                     eos_token_id=len(chars))
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return transformers.AutoTokenizer.from_pretrained(folder), \
        transformers.AutoModelForCausalLM.from_pretrained(folder).eval()


def _bd3lm_nll(model, ids, context, window):
    """BD3-LM's record_generative_perplexity, written out: a window from 0, then windows
    every `window // 2` positions, each adding the NLL of the tokens past the window before;
    summed here over the positions after `context` tokens."""
    stride, n = window // 2, len(ids)
    x = torch.tensor([ids])
    nlls = torch.zeros(n, dtype=torch.float64)
    for i in range(max(math.ceil((n - window + stride) / stride), 1)):
        start = i * stride
        end = min(start + window, n)
        with torch.no_grad():
            logits = model(x[:, start:end]).logits[0].double()
        chunk = torch.nn.functional.cross_entropy(logits[:-1], x[0, start + 1 : end],
                                                  reduction="none")
        if i == 0:
            nlls[start + 1 : end] += chunk
        else:
            update = start + window - stride
            nlls[update:end] += chunk[-(end - update):]
    return float(nlls[context:].sum())


@pytest.mark.slow  # transformers' import and a saved model: seconds
def test_a_scorer_shorter_than_prompt_and_sample_reads_bd3lms_windows(fsc_main, tmp_path):
    """8 prompt and 12 sample characters under a GPT-2 of 12 positions: an internal error
    (IndexError) before; now BD3-LM's windows of 12 sliding by 6."""
    tok, model = _gpt2(tmp_path / "gpt2", 12)
    ref = _reference_row(fsc_main, tmp_path, "shakespeare", tmp_path / "gpt2")
    grid = _grid("shakespeare")
    nll, count = 0.0, 0
    for prompt, cont in genppl.draws(grid, genppl.text_tokens(grid, ByteTokenizer(), 12), 12):
        ctx = tok.encode(bytes(prompt).decode())
        new = tok.encode(bytes(cont).decode(), add_special_tokens=False)
        assert len(ctx) + len(new) == 20
        nll += _bd3lm_nll(model, ctx + new, len(ctx), 12)
        count += len(new)
    assert ref["scored_tokens"] == count
    assert ref["gen_ppl"] == pytest.approx(math.exp(nll / count), rel=1e-6)


def test_an_fsc_scorer_reads_past_its_training_length_in_windows(fsc_main, tmp_path, ar_recipe):
    """A scorer fsc trained on 12 positions read 8 prompt and 12 sample characters in one
    pass, past what it learned (make quality's scorer: 1.55 nats per character over its 128,
    1.70 over 192); now BD3-LM's windows of 12 sliding by 6, as a transformers scorer's."""
    from types import SimpleNamespace

    from fsc.checkpoint.io import save_checkpoint

    model = build_model(load_recipe(ar_recipe), seed=0).eval()
    save_checkpoint(model, tmp_path / "ar" / "step-000001", training={
        "objective": "ar", "steps": 1, "data": "shakespeare", "seq_len": 12, "final_loss": 5.0})
    (tmp_path / "ar" / "latest").write_text("step-000001")
    ref = _reference_row(fsc_main, tmp_path, "shakespeare", tmp_path / "ar")

    def logits_of(x):
        return SimpleNamespace(logits=model.forward_blockwise(x, [1] * x.shape[1]))

    grid = _grid("shakespeare")
    nll, whole, count = 0.0, 0.0, 0
    for prompt, cont in genppl.draws(grid, genppl.text_tokens(grid, ByteTokenizer(), 12), 12):
        nll += _bd3lm_nll(logits_of, prompt + cont, len(prompt), 12)
        whole += _bd3lm_nll(logits_of, prompt + cont, len(prompt), 20)  # one pass
        count += len(cont)
    assert ref["scored_tokens"] == count and ref["scorer_window"] == 12  # and it says so
    assert ref["gen_ppl"] == pytest.approx(math.exp(nll / count), rel=1e-9)
    assert abs(nll - whole) > 1e-3  # the windows change what is scored


@pytest.mark.slow  # mauve-text's import (faiss, scikit-learn): seconds
def test_mauve_buckets_are_the_packages_auto_count():
    """The mauve package's default quantizes n samples into max(2, round(n / 10)) buckets: 4
    for 36 (fsc chose 3 before: n // 10)."""
    pytest.importorskip("mauve")
    from fsc.eval import mauve as fsc_mauve

    rng = np.random.default_rng(0)
    seen = {}

    class Scorer:
        def hidden(self, ids):
            return torch.from_numpy(rng.normal(size=8) + (ids[-1] == 1))

    class Scored:
        scorer = Scorer()

        def context(self, prompt):
            return prompt

        def ids(self, ids):
            return ids

    import mauve

    real = mauve.compute_mauve

    def spy(**kw):
        out = real(**kw)
        seen["buckets"] = out.num_buckets
        return out

    samples = [([0], [0])] * 36
    mp = pytest.MonkeyPatch()
    mp.setattr(mauve, "compute_mauve", spy)
    try:
        value = fsc_mauve.mauve_of(Scored(), samples, [[1]] * 36, seed=0)
    finally:
        mp.undo()
    assert seen["buckets"] == 4 and 0 < value <= 1
