"""docs/training.md and docs/checkpoint.md, claim by claim, against `fsc train`: a comma-list
option given twice joins its lists (--seq-len, --freeze); a refusal names the value once; the
config.json of an adaptation that added a mask token says which id; a step saved again where
a removed run's step was is recorded in `fsc artifacts` again."""

import json
import shutil

import pytest

COPY = ["--data", "copy", "--batch", "1", "--train-steps", "1", "--device", "cpu"]


def _training(tmp_path, out: str) -> dict:
    return json.loads((tmp_path / out / "step-000001" / "config.json").read_text())["training"]


def test_seq_len_given_twice_joins_its_lengths(fsc_main, tmp_path):
    """`--seq-len 32 --seq-len 64` is `--seq-len 32,64` (README: a comma list given again
    joins), not 64 alone."""
    fsc_main("train", "tiny_attn", *COPY, "--seq-len", "32", "--seq-len", "64", "--out", "run",
             "--store", tmp_path / "st", check=0)
    training = _training(tmp_path, "run")
    assert training["seq_len"] == 64
    assert training["lengths"] == [[32, 1.0], [64, 1.0]]


def test_a_seq_len_refusal_names_the_value_once(fsc_main, tmp_path):
    res = fsc_main("train", "tiny_attn", *COPY, "--seq-len", "32:1,64:0", "--out", "run",
                   "--store", tmp_path / "st")
    said = " ".join(res.stderr.split())
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "the longest length, 64," in said and said.count("32:1,64:0") == 1, said
    assert not (tmp_path / "run").exists()


def test_freeze_given_twice_joins_its_kinds(fsc_main, tmp_path):
    """`--freeze mamba --freeze attention` freezes both kinds, not the last alone; a kind
    given twice over the two is refused."""
    fsc_main("train", "tiny_hybrid", *COPY, "--seq-len", "32", "--freeze", "mamba",
             "--freeze", "attention", "--out", "run", "--store", tmp_path / "st", check=0)
    assert _training(tmp_path, "run")["freeze"] == ["mamba", "attention"]
    res = fsc_main("train", "tiny_hybrid", *COPY, "--seq-len", "32", "--freeze", "mamba",
                   "--freeze", "mamba", "--out", "again", "--store", tmp_path / "st")
    assert res.returncode == 2 and "a kind given twice" in res.stderr, res.stderr
    assert not (tmp_path / "again").exists()


@pytest.mark.slow  # seconds: two runs (make test-slow)
def test_an_added_mask_token_is_in_config_json(fsc_main, tmp_path):
    """docs/training.md: `training.mask_added` in config.json says which id the mask token
    added to a tokenizer without one got."""
    from tokenizers import Tokenizer, decoders, models

    tok = tmp_path / "tok"
    tok.mkdir()
    vocab = {chr(i): i for i in range(199)} | {"[UNK]": 199}  # 200 tokens, no mask token
    t = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    t.decoder = decoders.Fuse()
    t.save(str(tok / "tokenizer.json"))
    text = ["--data", "shakespeare", "--seq-len", "32", "--batch", "2", "--train-steps", "1",
            "--device", "cpu", "--store", tmp_path / "st"]
    fsc_main("train", "tiny_attn", "--objective", "ar", *text, "--out", "ar", check=0)
    fsc_main("train", tmp_path / "ar", "--G", "4", "--tokenizer", tok, *text, "--out", "ad",
             check=0)
    assert _training(tmp_path, "ad")["mask_added"] == {"token": "<|mdm_mask|>", "id": 200}


def test_a_step_saved_again_where_a_removed_one_was_is_recorded(fsc_main, tmp_path):
    """A run removed and trained again into the same --out (other weights) is in `fsc
    artifacts` twice, each with its own files; a resume records only the steps it added."""
    st = ["--store", tmp_path / "st"]
    fsc_main("train", "tiny_attn", *COPY, "--seq-len", "32", "--out", "run", *st, check=0)
    shutil.rmtree(tmp_path / "run")
    fsc_main("train", "tiny_attn", *COPY, "--seq-len", "64", "--out", "run", *st, check=0)
    fsc_main("train", "--resume", "run", "--train-steps", "2", *st, check=0)
    rows = json.loads(fsc_main("artifacts", "--json", *st, check=0).stdout)
    first = [r for r in rows if r["path"].endswith("step-000001")]
    assert [r["action"] for r in first] == ["saved", "saved"]
    assert first[0]["files_sha256"] != first[1]["files_sha256"]
    assert first[1]["files_sha256"]["config.json"] == _sha(tmp_path / "run" / "step-000001")
    assert sum(r["path"].endswith("step-000002") for r in rows) == 1


def _sha(step) -> str:
    import hashlib

    return hashlib.sha256((step / "config.json").read_bytes()).hexdigest()


def test_data_given_twice_is_refused(fsc_main, tmp_path):
    """`--data passkey --data vt` trained vt alone, without a word: a mix is one comma list."""
    res = fsc_main("train", "tiny_attn", "--data", "passkey", "--data", "vt", "--seq-len", "64",
                   "--train-steps", "1", "--out", "run", "--store", tmp_path / "st")
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1
    assert ("given 2 times ('passkey', 'vt'); a mix of tasks is one list, e.g. --data "
            "passkey:2,vt:1") in res.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "st").exists()
