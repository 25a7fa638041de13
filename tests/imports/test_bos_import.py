"""An imported model whose tokenizer is not bytes and begins a text with BOS (a byte-level BPE
whose post-processor adds `<s>`, as Llama's does), through the commands a user runs: its own
tokenizer and its BOS in `fsc decode`, `fsc eval --task loss` and a Gen-PPL scorer, the same
numbers as transformers on the same text, from the published folder and from its import."""

import json
import math
import shutil

import pytest
import torch
from published import save_llama_with_bos

from fsc.checkpoint.layout import read_checksums, write_checksums
from fsc.imports.reference import reference_greedy

pytest.importorskip("transformers")

PROMPT = "ROMEO: To be, or not"


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """(published folder, its `fsc import`, transformers' tokenizer and model)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fsc.cli.main import main

    root = tmp_path_factory.mktemp("bos")
    folder = save_llama_with_bos(root / "tl")
    assert main(["import", str(folder), "--out", str(root / "ck"),
                 "--store", str(root / "st")]) == 0
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    return folder, root / "ck", tok, model


def test_the_fixture_is_the_case_that_matters(llama):
    _, ck, tok, _ = llama
    ids = tok(PROMPT)["input_ids"]
    assert ids[0] == tok.bos_token_id == 1 and len(ids) < len(PROMPT.encode())  # BOS, not bytes
    assert json.loads((ck / "config.json").read_text())["bos"] is True


@pytest.mark.parametrize("which", ["folder", "import"])
def test_decode_gives_transformers_greedy_tokens(llama, which, fsc_main):
    folder, ck, tok, model = llama
    res = fsc_main("decode", folder if which == "folder" else ck, "--prompt", PROMPT,
                   "--length", "12", "--json", check=0)
    doc = json.loads(res.stdout)
    want = tok(PROMPT)["input_ids"]
    assert doc["prompt_ids"] == want
    assert doc["token_ids"] == reference_greedy(model, want, 12)
    assert doc["text"] == tok.decode(doc["token_ids"])


def test_a_moved_import_decodes_the_same(llama, fsc_main, tmp_path):
    _, ck, _, _ = llama
    first = json.loads(fsc_main("decode", ck, "--prompt", PROMPT, "--length", "4", "--json",
                                check=0).stdout)
    shutil.copytree(ck, tmp_path / "moved")
    again = json.loads(fsc_main("decode", tmp_path / "moved", "--prompt", PROMPT, "--length",
                                "4", "--json", check=0).stdout)
    assert again["prompt_ids"] == first["prompt_ids"] and again["token_ids"] == first["token_ids"]


def test_loss_reads_the_models_own_tokens_after_bos(llama, fsc_main, tmp_path):
    """Every sequence of the text (so their order cannot matter), each read after BOS: fsc's
    mean NLL per token equals transformers' on the same tokens."""
    _, ck, tok, model = llama
    from fsc.corpora import read

    text = read("shakespeare:val")[:3000]
    (tmp_path / "val.txt").write_text(text)
    ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    L = 64
    n = len(ids) // L
    want = []
    with torch.no_grad():
        for i in range(n):
            seq = torch.tensor([[tok.bos_token_id, *ids[i * L : (i + 1) * L]]])
            logits = model(input_ids=seq).logits[0, :-1]
            want.append(float(torch.nn.functional.cross_entropy(logits, seq[0, 1:])))
    res = fsc_main("eval", ck, "--task", "loss", "--data", tmp_path / "val.txt", "--lengths",
                   str(L), "--samples", str(n), "--store", tmp_path / "st", "--json", check=0)
    row = json.loads(res.stdout)["rows"][0]
    assert row["distinct_sequences"] == n < len(text.encode()) // L  # tokens, not bytes
    assert row["loss"] == pytest.approx(sum(want) / n, rel=1e-4)
    assert row["bits_per_byte"] == pytest.approx(
        sum(want) * L / math.log(2) / len(tok.decode(ids[: n * L]).encode()), rel=1e-3)


def test_an_ar_import_is_scored_with_its_own_tokenizer_when_given_it(llama, fsc_main, tmp_path):
    _, ck, _, _ = llama  # no mask token: an autoregressive model needs none
    res = fsc_main("eval", ck, "--task", "loss", "--data", "shakespeare", "--lengths", "32",
                   "--samples", "2", "--tokenizer", ck, "--store", tmp_path / "st", "--json")
    assert res.returncode == 0, res.stderr


def test_a_scorer_scores_alike_through_transformers_and_through_its_import(llama, fsc_main,
                                                                            tmp_path):
    folder, ck, _, _ = llama
    ref = {}
    for name, scorer in (("transformers", folder), ("import", ck)):
        res = fsc_main("eval", "tiny_attn", "--task", "genppl", "--scorer", scorer,
                       "--samples", "2", "--lengths", "16", "--steps", "1", "--data",
                       "shakespeare", "--store", tmp_path / name, "--json", check=0)
        rows = json.loads(res.stdout)["rows"]
        ref[name] = next(r["gen_ppl"] for r in rows if r["mode"] == "reference")
    assert ref["import"] == pytest.approx(ref["transformers"], rel=1e-4)


def test_verify_checks_an_import_against_the_model_it_came_from(llama, fsc_main, tmp_path):
    folder, ck, _, _ = llama
    res = fsc_main("verify", ck, "--against", "transformers", "--json", check=0)
    doc = json.loads(res.stdout)
    assert doc["exact"] is True and doc["architecture"] == "LlamaForCausalLM"
    assert doc["source"] == f"{ck} (imported from {folder.resolve()})"
    said = " ".join(fsc_main("verify", ck, "--against", "transformers", check=0).stdout.split())
    assert said.startswith(f"LlamaForCausalLM {ck} (imported from {folder.resolve()}) against")
    config = json.loads((ck / "config.json").read_text())
    config["imported_from"] = f"{tmp_path / 'gone'} (LlamaForCausalLM)"
    shutil.copytree(ck, tmp_path / "orphan")
    (tmp_path / "orphan" / "config.json").write_text(json.dumps(config))
    write_checksums(tmp_path / "orphan", list(read_checksums(tmp_path / "orphan")))  # listed
    res = fsc_main("verify", tmp_path / "orphan", "--against", "transformers")
    assert res.returncode == 2 and "which is not here" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_decode_stops_at_every_eos_the_generation_config_lists(llama, fsc_main, tmp_path):
    """A model whose generation_config.json lists several EOS ids (as Qwen3's and Llama 3's
    do) ends at the first of any of them, as transformers' generate does, from its folder and
    from its import (which carries the file)."""
    folder, _, tok, model = llama
    want = tok(PROMPT)["input_ids"]
    greedy = reference_greedy(model, want, 12)
    at = next(i for i in range(2, 12) if greedy[i] not in greedy[:i] and greedy[i] != 2)
    copy = tmp_path / "eos"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "generation_config.json").read_text()) if (
        copy / "generation_config.json").is_file() else {}
    (copy / "generation_config.json").write_text(json.dumps({**config,
                                                             "eos_token_id": [2, greedy[at]]}))
    assert fsc_main("import", copy, "--out", tmp_path / "ck", "--store", tmp_path / "st",
                    check=0).returncode == 0
    for source in (copy, tmp_path / "ck"):
        doc = json.loads(fsc_main("decode", source, "--prompt", PROMPT, "--length", "12",
                                  "--json", check=0).stdout)
        assert doc["token_ids"] == greedy[: at + 1], source
    stopped = model.generate(torch.tensor([want]), max_new_tokens=12, do_sample=False,
                             eos_token_id=[2, greedy[at]])[0, len(want):].tolist()
    assert stopped == greedy[: at + 1]
