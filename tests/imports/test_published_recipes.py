"""recipes/published/: published configs (config.json as their authors ship it) beside the
recipe `fsc import` makes of each; neither is a shipped recipe."""

from pathlib import Path

import pytest

from fsc.imports import import_config
from fsc.recipe import load_recipe, shipped_dir, shipped_recipes

PUBLISHED = shipped_dir() / "published"
NAMES = sorted(p.name for p in PUBLISHED.iterdir() if p.is_dir())


def test_there_are_published_configs_and_they_are_not_shipped_recipes():
    assert {"Llama-3.1-8B", "Qwen3-8B", "Mamba2-2.7B", "Bamba-9B",
            "Qwen3-Next-80B-A3B"} <= set(NAMES)
    assert not set(NAMES) & set(shipped_recipes())


@pytest.mark.parametrize("name", NAMES)
def test_each_recipe_is_what_fsc_import_makes_of_its_config(name, monkeypatch):
    monkeypatch.chdir(shipped_dir().parent)
    imported = import_config(Path("recipes/published") / name)
    assert (PUBLISHED / f"{name}.yaml").read_text() == imported.recipe_yaml()
    recipe = load_recipe(PUBLISHED / f"{name}.yaml")
    assert recipe.recipe_hash == imported.recipe.recipe_hash and recipe.block_size == 1
    assert "# Source: " in imported.recipe_yaml()


@pytest.mark.parametrize("name", NAMES)
def test_each_recipe_narrows_for_verify(name):
    """`fsc verify` checks a large recipe at a reduced width: the explicit FFN and expert
    widths and the rotated fraction of each head scale with it."""
    recipe = load_recipe(PUBLISHED / f"{name}.yaml")
    narrow = recipe.with_width(256, vocab_size=1024)
    assert narrow.layer_plan == recipe.layer_plan and narrow.d_model == 256
    for ffn, key in (("mlp", "hidden"), ("moe", "hidden"), ("moe", "shared_hidden")):
        width = getattr(getattr(recipe, ffn), key, None)
        if width is not None:
            assert getattr(getattr(narrow, ffn), key) == round(width * 256 / recipe.d_model)
    a = recipe.attention
    if a is not None and a.rope_dims is not None:  # Bamba: half of each head; Qwen3-Next: 1/4
        fraction = a.rope_dims / (a.head_dim or recipe.d_model // a.n_heads)
        head_dim = 256 // narrow.attention.n_heads
        assert narrow.attention.rope_dims == 2 * round(fraction * head_dim / 2)


@pytest.mark.parametrize("columns", ["60"])
def test_the_printed_recipe_is_never_wrapped(columns, monkeypatch, tmp_path):
    """`fsc import SRC > r.yaml` at any terminal width writes a recipe fsc builds: machine
    output is written as it is (a wrapped `# Source:` comment was invalid YAML)."""
    import subprocess
    import sys

    monkeypatch.chdir(shipped_dir().parent)
    for name in ("Qwen3-8B", "Bamba-9B"):
        res = subprocess.run([sys.executable, "-m", "fsc", "import", f"recipes/published/{name}"],
                             capture_output=True, text=True, env={**__import__("os").environ,
                                                                  "COLUMNS": columns})
        assert res.returncode == 0, res.stderr
        assert res.stdout == (PUBLISHED / f"{name}.yaml").read_text()
        (tmp_path / "r.yaml").write_text(res.stdout)
        load_recipe(tmp_path / "r.yaml")


def test_published_recipes_are_named_from_anywhere_and_listed(fsc_main, tmp_path):
    """From any directory, `published/NAME` names the recipe of a published model, as a
    shipped recipe's name does; `fsc recipes` lists them."""
    import json

    res = fsc_main("estimate", "published/Llama-3.1-8B", "--S", "256k", "--B", "8", "--json")
    assert res.returncode == 0, res.stderr  # fsc_main runs in tmp_path, not the repository
    assert json.loads(res.stdout)["weight_bytes"] > 10**10
    rows = {r["name"]: r for r in json.loads(fsc_main("recipes", "--json").stdout)}
    assert {f"published/{n}" for n in NAMES} <= set(rows) and "tiny_attn" in rows
    # the summary says which FFN each has: none in Mamba-2 (mlp: {kind: none})
    assert rows["published/Mamba2-2.7B"]["summary"].endswith("64 mamba), no mlp, G 1")
    assert ", mlp, G 1" in rows["published/Bamba-9B"]["summary"]


def test_import_reads_a_published_model_by_name_from_anywhere(fsc_main, tmp_path):
    """`fsc import published/NAME` reads the folder recipes/published/NAME, the recipe's hash
    that of the shipped recipe; a published name that is not there is one line, exit 2."""
    import json

    for name in NAMES:  # fsc_main runs in tmp_path, not the repository
        res = fsc_main("import", f"published/{name}", "--json")
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["recipe_hash"] == load_recipe(PUBLISHED / f"{name}.yaml").recipe_hash
        assert doc["recipe"] == name
    res = fsc_main("import", "published/Qwen3-8B", "--out", "q.yaml")
    assert res.returncode == 0 and load_recipe(tmp_path / "q.yaml").name == "Qwen3-8B"
    res = fsc_main("import", "published/Qwen9-8B")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr == ("error: published/Qwen9-8B: no such folder, nor a published model of "
                          "that name (`fsc recipes` lists them)\n")
    (tmp_path / "published" / "Qwen3-8B").mkdir(parents=True)  # a folder here comes first
    res = fsc_main("import", "published/Qwen3-8B")
    assert res.returncode == 2 and "published/Qwen3-8B: holds no config.json, so no published model" in res.stderr


def test_import_help_names_every_family_it_imports(fsc_main):
    """`fsc import --help` lists every architecture fsc.imports.FAMILIES takes."""
    import re

    from fsc.imports import FAMILIES

    text = " ".join(fsc_main("import", "--help", check=0).stdout.split())
    for arch in FAMILIES:
        name = arch.removesuffix("ForCausalLM")
        name = {"Mamba2": "Mamba-2", "Qwen3Next": "Qwen3-Next",
                "MambaLMHeadModel": "mamba_ssm"}.get(name, name)
        assert re.search(rf"\b{re.escape(name)}\b", text), (arch, text[:400])
