"""One BOS convention: training sequences begin without BOS, every checkpoint records it
(config.json `bos`), and `fsc decode` begins its prompt as the checkpoint records; a
checkpoint older than the record was trained without BOS and is decoded so."""

import json

import pytest

from fsc.checkpoint.io import save_checkpoint
from fsc.checkpoint.layout import CHECKSUMS_FILE, read_checksums, write_checksums
from fsc.data.sources import BOS
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.source import Source
from fsc.tokenizer import ByteTokenizer, load_tokenizer, prompt_ids

TOK = ByteTokenizer()


def test_prompt_ids_put_bos_first_only_when_asked_or_empty(tmp_path):
    assert prompt_ids(TOK, "Hi", bos=False) == TOK.encode("Hi")
    assert prompt_ids(TOK, "Hi", bos=True) == [TOK.bos_id, *TOK.encode("Hi")]
    assert prompt_ids(TOK, "", bos=False) == [TOK.bos_id]  # nothing else to start from
    from tokenizers import Tokenizer, models

    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "[MASK]": 1, "hi": 2}, unk_token="[UNK]"))
    tok.save(str(tmp_path / "tokenizer.json"))
    hf = load_tokenizer(tmp_path)  # no BOS token: the text alone
    assert prompt_ids(hf, "hi", bos=True) == [2] and prompt_ids(hf, "", bos=True) == []


def _checkpoint(path, **kw):
    save_checkpoint(build_model(load_recipe("tiny_attn"), seed=1), path, **kw)
    return path


def _without_bos_field(path):
    """The checkpoint as fsc wrote it before config.json had `bos` (checksums rewritten)."""
    config = json.loads((path / "config.json").read_text())
    del config["bos"]
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    names = [n for n in read_checksums(path) if n != CHECKSUMS_FILE]
    write_checksums(path, names)
    return path


def test_the_checkpoint_records_its_convention(tmp_path):
    assert BOS is False  # fsc trains without BOS
    plain = _checkpoint(tmp_path / "plain")
    assert json.loads((plain / "config.json").read_text())["bos"] is False
    assert not Source.read(plain).starts_with_bos()
    assert Source.read(_checkpoint(tmp_path / "bos", bos=True)).starts_with_bos()
    assert not Source.read(_without_bos_field(_checkpoint(tmp_path / "old"))).starts_with_bos()
    assert not Source.read("tiny_attn").starts_with_bos()  # a recipe's seeded weights


@pytest.mark.parametrize("kind, bos", [("plain", False), ("bos", True), ("old", False)])
def test_decode_follows_the_checkpoint(fsc_main, tmp_path, kind, bos):
    path = _checkpoint(tmp_path / kind, bos=kind == "bos")
    if kind == "old":
        _without_bos_field(path)
    res = fsc_main("decode", path, "--prompt", "The pass key is", "--length", "4", "--json",
                   check=0)
    assert json.loads(res.stdout)["stats"]["prompt_tokens"] == 15 + bos


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_trained_checkpoint_says_no_bos(fsc_main, tmp_path):
    fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "1",
             "--batch", "2", "--out", tmp_path / "run", "--store", tmp_path / "s", check=0)
    config = json.loads((tmp_path / "run" / "step-000001" / "config.json").read_text())
    assert config["bos"] is False


def test_an_imported_checkpoint_begins_with_bos_where_its_tokenizer_adds_one(tmp_path):
    """Its tokenizer.json's post-processor decides (transformers 5 follows it whatever
    tokenizer_config.json's add_bos_token says); no tokenizer.json: no BOS."""
    from tokenizers import Tokenizer, models, processors

    from fsc.imports.convert import adds_bos

    assert adds_bos(tmp_path) is False
    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "<s>": 1, "a": 2, "b": 3}, unk_token="[UNK]"))
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": True}))
    assert adds_bos(tmp_path) is False
    tok.post_processor = processors.TemplateProcessing(single="<s> $A",
                                                       special_tokens=[("<s>", 1)])
    tok.save(str(tmp_path / "tokenizer.json"))
    hf = load_tokenizer(tmp_path, need_mask=False)
    assert adds_bos(tmp_path) is True and hf.bos_id == 1 and hf.encode("a") == [2]
    assert prompt_ids(hf, "a", bos=True) == [1, 2] and hf.token_text(1) == "<s>"
