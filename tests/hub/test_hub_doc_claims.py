"""docs/hub.md and docs/import.md, claim by claim: a destination that is the current directory,
--out checked before an hf: import downloads weights, a push to a commit id, the hf: prefix
given to push or pull."""

from __future__ import annotations

import json

import pytest
from fsc_run import in_process
from hub_helpers import assert_one_line_error

# a Llama config fsc imports; the weights beside it are never read by these checks
LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "num_hidden_layers": 1,
         "vocab_size": 64, "num_attention_heads": 2, "num_key_value_heads": 2,
         "intermediate_size": 64, "torch_dtype": "float32"}


def _said(r) -> str:
    return " ".join(r.stderr.split())


@pytest.mark.parametrize("force", [(), ("--force",)])
def test_pull_into_the_current_directory_is_refused(tmp_path, monkeypatch, force):
    """`--dir .` in an empty folder once failed saying the folder was not empty (the temporary
    download sat inside it); it is refused before any network call, naming the option."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # never the network
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    r = in_process("pull", "alice/tiny", "--dir", ".", *force, "--store", tmp_path / "store")
    assert r.returncode == 2 and "--dir .: the current directory" in _said(r), r.stderr
    assert list(here.iterdir()) == [] and not (tmp_path / "store").exists()


def test_import_into_the_current_directory_is_refused(tmp_path, monkeypatch):
    """A checkpoint is built beside its destination and renamed into place whole: `--out .`
    is refused in one line before the weights are read, and nothing is left behind."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(LLAMA))
    (src / "model.safetensors").write_bytes(b"never read")
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    r = in_process("import", src, "--out", ".", "--store", tmp_path / "store")
    assert r.returncode == 2 and "--out .: the current directory" in _said(r), r.stderr
    assert list(here.iterdir()) == [] and not (tmp_path / "store").exists()


@pytest.mark.slow  # two processes through the Hub client
def test_an_hf_import_checks_out_before_it_downloads_the_weights(fsc, hub, tmp_path):
    """A refused --out (a folder with files, a .yaml name for a model with weights) costs the
    config and the file list, never the weights."""
    hub.put_repo("acme/tiny", {"config.json": json.dumps(LLAMA).encode(),
                               "model.safetensors": b"x" * 4096})
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    line = assert_one_line_error(fsc("import", "hf:acme/tiny", "--out", "full"))
    assert "--out full: already exists" in line, line
    line = assert_one_line_error(fsc("import", "hf:acme/tiny", "--out", "tiny.yaml"))
    assert "has weights" in line and "--recipe-only" in line, line
    fetched = [path for _, path in hub.requests if path.endswith("model.safetensors")]
    assert fetched == [], hub.requests
    assert not (tmp_path / "tiny.yaml").exists() and not (tmp_path / "store").exists()


def test_a_push_to_a_commit_id_is_refused(tmp_path):
    """--revision names the branch a commit goes on: a commit id is a usage error before the
    checkpoint is read or a token looked up (it said 'nothing new to push' or an HTTP 400)."""
    r = in_process("push", tmp_path / "ckpt", "--repo", "alice/tiny", "--revision", "a" * 40,
                   "--store", tmp_path / "store")
    assert r.returncode == 2 and "a commit id" in _said(r) and "--revision" in _said(r), r.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("args", [("pull", "hf:alice/tiny"),
                                  ("push", "ckpt", "--repo", "hf:alice/tiny")])
def test_the_hf_prefix_is_named_in_push_and_pull(tmp_path, args):
    """`fsc import`'s hf: prefix given to push or pull: the message says to drop it."""
    r = in_process(*args, "--store", tmp_path / "store")
    assert r.returncode == 2 and "without 'hf:'" in _said(r), r.stderr
