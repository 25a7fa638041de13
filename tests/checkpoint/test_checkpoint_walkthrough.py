"""A checkpoint as a user meets it: what its card says and whether its commands run, and the
ways a real folder goes wrong (cut short, edited, from a newer fsc, given by one of its files),
each refused in one line that names the cause."""

from __future__ import annotations

import json
import re
import shlex
import shutil

import pytest
from fsc_run import in_process

from fsc.checkpoint.card import model_card
from fsc.checkpoint.io import save_checkpoint, verify_checkpoint
from fsc.checkpoint.layout import CHECKSUMS_FILE, read_checksums, write_checksums
from fsc.errors import CheckpointError
from fsc.model.lm import build_model
from fsc.recipe import load_recipe


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One seeded tiny_hybrid checkpoint; each test edits its own copy."""
    d = tmp_path_factory.mktemp("saved") / "ckpt"
    save_checkpoint(build_model(load_recipe("tiny_hybrid"), seed=1), d, seed=1)
    return d


@pytest.fixture
def ckpt(saved, tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(saved, d)
    return d


def _resum(d) -> None:
    """Checksums rewritten over the edited files, as `sha256sum` would: only what fsc reads
    next can catch the edit."""
    write_checksums(d, list(read_checksums(d)))


def _said(res) -> str:
    return " ".join(res.stderr.split())


def _decode(d, *more):
    return in_process("decode", d, "--prompt", "hi", "--length", "4", *more)


def test_weights_cut_short_after_their_header_are_refused_in_one_line(ckpt):
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    _resum(ckpt)
    with pytest.raises(CheckpointError, match="truncated"):
        verify_checkpoint(ckpt)
    res = _decode(ckpt)
    assert res.returncode == 1 and "internal error" not in res.stderr
    assert (f"{weights}: holds 1,572,856 bytes of tensor data but its header describes "
            "1,573,856; the file is truncated or damaged") in _said(res)


def test_a_checkpoint_without_its_recipe_is_not_read_as_a_published_model(ckpt):
    (ckpt / "fsc_recipe.yaml").unlink()
    res = _decode(ckpt)
    said = _said(res)
    assert res.returncode == 1 and "architecture" not in said
    assert f"{ckpt}/fsc_recipe.yaml: missing; an fsc checkpoint" in said


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "README.md"])
def test_a_file_of_a_checkpoint_given_in_its_place_points_to_the_directory(ckpt, name):
    res = in_process("build", ckpt / name)
    assert res.returncode == 2
    assert (f"{ckpt / name}: a file in the checkpoint {ckpt}; give that directory instead"
            in _said(res))


def test_the_recipe_file_of_a_checkpoint_still_reads_as_a_recipe(ckpt):
    res = in_process("build", ckpt / "fsc_recipe.yaml", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["name"] == "tiny_hybrid"


def test_a_config_that_is_not_json_is_refused(ckpt):
    (ckpt / "config.json").write_text('{"seed": 1,')
    _resum(ckpt)
    res = _decode(ckpt)
    assert res.returncode == 1
    assert f"{ckpt}/config.json: not JSON" in _said(res)
    assert "the checkpoint's config is damaged" in _said(res)


@pytest.mark.parametrize("name", ["config.json", "fsc_recipe.yaml"])
def test_a_damaged_file_is_its_checksum_mismatch_in_every_command(fsc_main, ckpt, name):
    """A byte added to config.json (or the recipe) after the save: decode and eval say what
    verify and train --resume say, the checksum that does not match, not what parsing the
    file made of it (docs/checkpoint.md: checked before anything is parsed)."""
    with open(ckpt / name, "a") as f:
        f.write("corrupt\n")
    for args in (("decode", ckpt, "--prompt", "hi", "--length", "4"),
                 ("eval", ckpt, "--task", "loss", "--data", "copy", "--store", "store"),
                 ("verify", ckpt)):
        res = fsc_main(*args)
        said = _said(res)
        assert res.returncode == 1 and "Traceback" not in res.stderr, said
        assert f"error: {ckpt / name}: sha256 " in said and f"in {CHECKSUMS_FILE}" in said


def test_a_checkpoint_of_a_later_format_asks_for_a_newer_fsc(ckpt):
    config = json.loads((ckpt / "config.json").read_text())
    config |= {"format_version": 2, "fsc_version": "9.0.0"}
    (ckpt / "config.json").write_text(json.dumps(config))
    _resum(ckpt)
    res = _decode(ckpt)
    assert res.returncode == 1
    assert (f"{ckpt}/config.json: checkpoint format 2 (written by fsc 9.0.0), but fsc "
            in _said(res))
    assert "upgrade fsc to read it" in _said(res)


def test_a_recipe_field_from_a_newer_fsc_says_which_fsc_wrote_it(ckpt):
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps(config | {"fsc_version": "9.0.0"}))
    with open(ckpt / "fsc_recipe.yaml", "a") as f:
        f.write("future_knob: 3\n")
    _resum(ckpt)
    res = _decode(ckpt)
    said = _said(res)
    assert res.returncode == 2 and "future_knob: unknown key" in said
    assert "(the checkpoint was written by fsc 9.0.0; this is fsc " in said


def _facts(**more) -> dict:
    return {"kv_bytes_per_token": 1, "state_bytes_per_sequence": 1, "params_by_kind": {},
            "n_params": 1, "weight_bytes": 4, "weight_files": ["model.safetensors"],
            "seed": 0, **more}


def test_the_card_names_the_dtype_each_fixed_size_cache_is_held_in():
    """Attention alone keeps no fixed-size state; linear attention keeps its sums in fp32
    whatever state_dtype says (fsc build reports the same)."""
    attn = model_card(load_recipe("tiny_attn"), _facts())
    assert "fp32 weights, no fixed-size state." in " ".join(attn.split())
    assert "recurrent states" not in attn
    linear = load_recipe("tiny_linear").model_copy(update={"state_dtype": "bf16"})
    card = " ".join(model_card(linear, _facts()).split())
    assert "fp32 weights, fp32 fixed-size states." in card and "bf16" not in card


def _use_commands(card: str, ckpt) -> list[list[str]]:
    block = re.search(r"## Use\n.*?```\n(.*?)```", card, re.S).group(1)
    return [[str(ckpt) if w == "my_ckpt" else w for w in shlex.split(line)]
            for line in block.splitlines() if line.startswith("fsc decode")]


def test_the_cards_decode_command_runs_as_pasted(saved, tmp_path):
    """The card's `fsc decode` line, with the folder's path for my_ckpt, decodes: text for a
    model with a tokenizer (fsc's bytes), token ids for a published one imported without."""
    card = (saved / "README.md").read_text()
    (cmd,) = _use_commands(card, saved)
    assert in_process(*cmd[1:]).returncode == 0
    imported = tmp_path / "imported"
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": 2}\n')
    model = build_model(load_recipe("tiny_attn").as_autoregressive(), seed=2)
    save_checkpoint(model, imported, imported_from="published/tiny (LlamaForCausalLM)",
                    include=(tmp_path / "generation_config.json",))
    card = (imported / "README.md").read_text()
    (cmd,) = _use_commands(card, imported)
    res = in_process(*cmd[1:])
    assert res.returncode == 0, res.stderr
    assert "- `generation_config.json`: the published model's generation settings" in card


def test_artifacts_name_the_recipe_of_a_checkpoint_build_saved(tmp_path):
    store = tmp_path / "store"
    in_process("build", "tiny_attn", "--save", tmp_path / "c", "--store", store, check=0)
    rows = json.loads(in_process("artifacts", "--store", store, "--json", check=0).stdout)
    assert [(r["action"], r["recipe"]) for r in rows] == [("saved", "tiny_attn")]


def test_build_save_of_a_checkpoint_says_the_weights_are_seeded(ckpt, tmp_path):
    res = in_process("build", ckpt, "--save", tmp_path / "copy", "--store", tmp_path / "s",
                     check=0)
    assert (f"building tiny_hybrid with seed 0 (seeded weights, not those of {ckpt}) and "
            f"writing {tmp_path / 'copy'}") in _said(res)
    assert CHECKSUMS_FILE in {p.name for p in (tmp_path / "copy").iterdir()}


def test_build_seed_without_save_is_refused_not_ignored():
    res = in_process("build", "tiny_hybrid", "--seed", "5")
    assert res.returncode == 2 and res.stdout == ""
    assert "--seed seeds the weights --save writes; give --save DIR or drop --seed" in _said(res)


def test_the_card_of_a_sharded_checkpoint_lists_its_index(tmp_path):
    d = tmp_path / "sharded"
    save_checkpoint(build_model(load_recipe("tiny_attn"), seed=1), d, seed=1,
                    max_shard_bytes=200_000)
    files = sorted(p.name for p in d.iterdir())
    card = (d / "README.md").read_text()
    shards = [f for f in files if f.startswith("model-")]
    assert len(shards) > 1 and "model.safetensors.index.json" in files
    assert "- `" + "`, `".join(shards) + "`: weights (safetensors)." in card
    assert "- `model.safetensors.index.json`: which of those files holds each tensor." in card
