"""Checkpoint directories on disk: a destination that is (or holds) the current directory, a
tokenizer file dropped into a checkpoint after its save, an hf: import read at one commit while
its branch moves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fsc_run import in_process, new_process

from fsc.checkpoint.layout import CHECKSUMS_FILE, read_checksums, sha256_file

# a Llama config fsc imports (one layer; each commit below changes the layer count)
LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "num_hidden_layers": 1,
         "vocab_size": 64, "num_attention_heads": 2, "num_key_value_heads": 2,
         "intermediate_size": 64, "torch_dtype": "float32"}


def _said(r) -> str:
    return " ".join(r.stderr.split())


def _one_line(r, code: int) -> str:
    assert r.returncode == code, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    return _said(r)


# ---- a destination that is, or holds, the current directory -----------------------------------

@pytest.mark.parametrize("dest", [".", "../here"])
def test_build_save_into_the_current_directory_is_refused(tmp_path, monkeypatch, dest):
    """`fsc build --save .` in an empty folder built the checkpoint inside it, then failed
    saying the folder was not empty; the current directory is refused before any work."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    r = in_process("build", "tiny_attn", "--save", dest, "--store", tmp_path / "st")
    assert f"--save {dest}: the current directory" in _one_line(r, 2)
    assert list(here.iterdir()) == [] and not (tmp_path / "st").exists()


def test_build_save_into_a_folder_holding_the_current_directory_is_refused(tmp_path,
                                                                           monkeypatch):
    inner = tmp_path / "out" / "inner"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    r = in_process("build", "tiny_attn", "--save", tmp_path / "out", "--store", tmp_path / "st")
    assert "holds the current directory" in _one_line(r, 2)


def test_a_save_into_the_current_directory_is_refused_by_the_library(tmp_path, monkeypatch):
    from fsc.checkpoint.io import save_checkpoint
    from fsc.errors import UsageError
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="the current directory"):
        save_checkpoint(build_model(load_recipe("tiny_attn")), Path("."))
    assert list(tmp_path.iterdir()) == []


def test_pull_force_over_a_checkpoint_holding_the_current_directory_is_refused(
        tmp_path, monkeypatch, save_tiny):
    """`--force` replaces the checkpoint at --dir whole: from a folder inside it, the shell
    would be left in a removed folder; refused before any network call."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # never the network
    ck = save_tiny("ck")
    (ck / "notes").mkdir()
    monkeypatch.chdir(ck / "notes")
    r = in_process("pull", "alice/tiny", "--dir", "..", "--force", "--store", tmp_path / "st")
    assert "--dir ..: holds the current directory" in _one_line(r, 2)
    assert (ck / "notes").is_dir() and (ck / CHECKSUMS_FILE).is_file()


def test_import_out_holding_the_current_directory_is_refused(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(LLAMA))
    (src / "model.safetensors").write_bytes(b"never read")
    inner = tmp_path / "out" / "inner"
    inner.mkdir(parents=True)
    monkeypatch.chdir(inner)
    r = in_process("import", src, "--out", "..", "--store", tmp_path / "st")
    assert "--out ..: holds the current directory" in _one_line(r, 2)
    assert list((tmp_path / "out").iterdir()) == [inner]


def test_a_destination_given_twice_is_refused(tmp_path, monkeypatch):
    """click keeps the last of an option given twice: `--save a --save b` wrote b alone, unsaid
    (as `fsc push --repo` twice is refused, so are --save, pull's --dir and import's --out)."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # never the network
    monkeypatch.chdir(tmp_path)
    for args in (("build", "tiny_attn", "--save", "a", "--save", "b"),
                 ("pull", "alice/tiny", "--dir", "a", "--dir", "b"),
                 ("import", "published/Qwen3-8B", "--out", "a", "--out", "b")):
        said = _one_line(in_process(*args, "--store", "st"), 2)
        assert f"'{args[2]}': given 2 times ('a', 'b')" in said, args
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_save_through_a_link_to_an_empty_folder_fills_that_folder(tmp_path, monkeypatch):
    """The link was checked as an empty folder, then the finished checkpoint could not be
    renamed over it ("Not a directory"): it goes into the folder the link names."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    monkeypatch.chdir(tmp_path)
    in_process("build", "tiny_attn", "--save", "link", "--store", "st", check=0)
    assert (tmp_path / "link").is_symlink() and "fsc_recipe.yaml" in read_checksums(
        tmp_path / "real")


# ---- a tokenizer file the checksums do not list -----------------------------------------------

def _drop_tokenizer(ck: Path) -> None:
    """A character tokenizer (ids 0..94 for ' '..'~', then [MASK]) saved into `ck` by hand."""
    from tokenizers import Tokenizer, models

    chars = {chr(i): i - 32 for i in range(32, 127)} | {"[MASK]": 95}
    Tokenizer(models.BPE(vocab=chars, merges=[])).save(str(ck / "tokenizer.json"))


def _list(ck: Path, name: str) -> None:
    """`sha256sum NAME >> checksums.sha256`, as the refusal says."""
    with open(ck / CHECKSUMS_FILE, "a") as f:
        f.write(f"{sha256_file(ck / name)}  {name}\n")


def test_a_tokenizer_added_after_the_save_is_refused_until_listed(tmp_path, monkeypatch,
                                                                  save_tiny):
    """A tokenizer.json dropped into a checkpoint was read by decode but never verified nor
    pushed (a pulled copy read text as bytes); decode, verify and push now refuse it alike,
    naming the file and the fix, and read it once its checksum is listed."""
    ck = save_tiny("ck")
    _drop_tokenizer(ck)
    monkeypatch.setenv("HF_TOKEN", "hf_never_sent")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # never the network
    for args in (("decode", ck, "--prompt", "hi", "--length", "4"), ("verify", ck),
                 ("push", ck, "--repo", "alice/tiny", "--store", tmp_path / "st")):
        said = _one_line(in_process(*args), 1)
        assert f"{ck / 'tokenizer.json'}: not listed in {CHECKSUMS_FILE}" in said, args
        assert f"sha256sum tokenizer.json >> {CHECKSUMS_FILE}" in said, args
    _list(ck, "tokenizer.json")
    assert "tokenizer.json" in read_checksums(ck)
    doc = json.loads(in_process("decode", ck, "--prompt", "hi", "--length", "4", "--json",
                                check=0).stdout)
    assert doc["prompt_ids"] == [ord("h") - 32, ord("i") - 32]  # the tokenizer's, not bytes


def test_an_unlisted_generation_config_beside_a_listed_tokenizer_is_refused(save_tiny):
    """The EOS ids a decode stops at are read from generation_config.json beside the
    tokenizer: one added by hand is refused as the tokenizer is."""
    ck = save_tiny("ck")
    _drop_tokenizer(ck)
    _list(ck, "tokenizer.json")
    (ck / "generation_config.json").write_text(json.dumps({"eos_token_id": 5}))
    r = in_process("decode", ck, "--prompt", "hi", "--length", "4")
    assert f"{ck / 'generation_config.json'}: not listed" in _one_line(r, 1)


# ---- hf:ORG/NAME@BRANCH read at one commit -----------------------------------------------------

def _published_files(n_layers: int, seed: int) -> dict[str, bytes]:
    """config.json and model.safetensors of a Llama with `n_layers` layers (fsc's seeded
    weights under the published names)."""
    import tempfile

    from safetensors.torch import save_file

    from fsc.imports import import_config
    from fsc.imports.convert import published_name
    from fsc.model.lm import build_model

    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "config.json").write_text(json.dumps({**LLAMA, "num_hidden_layers": n_layers}))
        imported = import_config(folder)
        state = build_model(imported.recipe, seed=seed).state_dict()
        save_file({published_name(imported, k): v.contiguous() for k, v in state.items()},
                  folder / "model.safetensors")
        return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.slow  # a process through the Hub client: ~6 s
def test_an_hf_import_of_a_moving_branch_reads_one_commit(tmp_path):
    """Each time the branch `dev` is resolved it moves to a newer commit (1, 2, 3 layers): the
    recipe reported, the checkpoint's recipe and weights and the commit it records are all the
    first commit's."""
    import secrets

    from tests.hub.fakehub import LFS_SUFFIXES, FakeHub

    token = "hf_fsctest_" + secrets.token_hex(16)
    with FakeHub(token) as hub:
        first = hub.put_repo("acme/tiny", _published_files(1, seed=1), branch="dev")
        repo = hub.repos["acme/tiny"]
        later = [hub._new_commit(repo, files, {p for p in files if p.endswith(LFS_SUFFIXES)},
                                 f"layers {n}")
                 for n, files in ((2, _published_files(2, 2)), (3, _published_files(3, 3)))]
        resolved = hub.head

        def moving(repo_id, revision, authed):
            got = resolved(repo_id, revision, authed)
            if revision == "dev" and later:
                repo.branches["dev"] = later.pop(0)  # (the handler holds the hub's lock)
            return got

        hub.head = moving
        env = {k: v for k, v in os.environ.items()
               if not k.upper().startswith(("HF_", "HUGGINGFACE_", "FSC_", "HTTP_PROXY",
                                            "HTTPS_PROXY", "ALL_PROXY"))}
        env.update(HF_ENDPOINT=hub.url, HF_HUB_DISABLE_XET="1", HF_TOKEN=token,
                   HF_HOME=str(tmp_path / "hf_home"), HF_HUB_DISABLE_TELEMETRY="1",
                   NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
                   FSC_STORE=str(tmp_path / "st"))
        r = new_process("import", "hf:acme/tiny@dev", "--out", "ck", "--json", env=env,
                        cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    config = json.loads((tmp_path / "ck" / "config.json").read_text())
    assert config["imported_from"] == f"hf:acme/tiny@{first} (LlamaForCausalLM)"
    assert config["n_layers"] == 1 and config["recipe_hash"] == doc["recipe_hash"]
    assert doc["checkpoint"]["recipe_hash"] == doc["recipe_hash"]
