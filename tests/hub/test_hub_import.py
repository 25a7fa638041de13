"""`fsc import hf:ORG/NAME[@REV]` against the fake Hub: config, weights and tokenizer files come
through huggingface_hub (HF_ENDPOINT); a config alone is enough for `fsc estimate hf:...`."""

import json
from pathlib import Path

import pytest

from tests.imports.published import save_published

pytest.importorskip("transformers")


def _put(hub, repo: str, folder: Path, skip=()) -> str:
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.name not in skip}
    return hub.put_repo(repo, files)


@pytest.mark.slow  # an import through the local Hub: ~10 s: make test-slow (CI runs it)
def test_import_from_the_hub(hub, fsc, tmp_path):
    folder = save_published("qwen2", tmp_path / "qwen2")
    first = _put(hub, "acme/tiny-qwen2", folder)
    res = fsc("import", f"hf:acme/tiny-qwen2@{first}", "--out", "ck", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["architecture"] == "Qwen2ForCausalLM" and doc["recipe"] == "tiny-qwen2"
    ck = tmp_path / "ck"
    assert (ck / "fsc_recipe.yaml").read_text().startswith(
        f"# Imported by `fsc import` from hf:acme/tiny-qwen2@{first} (Qwen2ForCausalLM).")
    assert (ck / "model.safetensors").is_file() and (ck / "checksums.sha256").is_file()
    # a config alone: estimate downloads config.json and nothing else
    _put(hub, "acme/config-only", folder, skip={"model.safetensors"})
    res = fsc("estimate", "hf:acme/config-only", "--S", "262144", "--G", "1", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["recipe"] == "config-only"


@pytest.mark.slow  # two more processes of the same client; make test keeps the import above
def test_a_config_alone_imports_as_a_recipe_and_a_missing_repo_is_one_line(hub, fsc, tmp_path):
    folder = save_published("qwen2", tmp_path / "qwen2")
    _put(hub, "acme/config-only", folder, skip={"model.safetensors"})
    res = fsc("import", "hf:acme/config-only", "--out", "r.yaml")
    assert res.returncode == 0 and (tmp_path / "r.yaml").is_file(), res.stderr
    res = fsc("import", "hf:acme/missing")
    assert res.returncode == 2 and "not found" in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1


@pytest.mark.slow  # a decode through the local Hub
def test_text_for_a_hub_model_says_its_tokenizer_is_not_read(hub, fsc, tmp_path):
    """`fsc decode hf:ORG/NAME --prompt ...` of a repository that holds a tokenizer said
    "no tokenizer for text": an hf: source is read for its config alone, which it now says,
    with the import that fetches the rest."""
    folder = save_published("qwen2", tmp_path / "qwen2")
    _put(hub, "acme/tiny-qwen2", folder)
    res = fsc("decode", "hf:acme/tiny-qwen2", "--prompt", "hi", "--length", "4")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert ("no tokenizer for text: hf:acme/tiny-qwen2 is read for its config alone, without "
            "its weights or tokenizer; fetch them with fsc import hf:acme/tiny-qwen2 --out DIR"
            in res.stderr)
