"""Checkpoint directories: what save writes, what load accepts and what it refuses."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

from fsc.checkpoint import io as ckpt_mod
from fsc.checkpoint.io import load_checkpoint, save_checkpoint, verify_checkpoint
from fsc.checkpoint.layout import CHECKSUMS_FILE, write_checksums
from fsc.errors import CheckpointError
from fsc.model.lm import build_model, count_params
from fsc.recipe import load_recipe


def _state_equal(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_save_writes_a_complete_verifiable_directory(tmp_path):
    recipe = load_recipe("tiny_hybrid")
    model = build_model(recipe, seed=3)
    info = save_checkpoint(model, tmp_path / "c", seed=3)
    d = tmp_path / "c"
    names = {"fsc_recipe.yaml", "config.json", "README.md", "model.safetensors", CHECKSUMS_FILE}
    assert {p.name for p in d.iterdir()} == names
    assert [p.name for p in tmp_path.iterdir()] == ["c"]  # no temporary directory left behind
    assert info.path == str(d.resolve()) and info.recipe_hash == recipe.recipe_hash
    assert set(info.files) == names - {CHECKSUMS_FILE, "README.md"}  # (the card: its owner's)
    assert info.n_params == count_params(model)["total"]
    if shutil.which("sha256sum"):  # the checksums file is plain sha256sum format
        subprocess.run(["sha256sum", "--quiet", "-c", CHECKSUMS_FILE], cwd=d, check=True)
    assert load_recipe(d / "fsc_recipe.yaml").recipe_hash == recipe.recipe_hash

    config = json.loads((d / "config.json").read_text())
    assert config["recipe_hash"] == recipe.recipe_hash and config["G"] == recipe.block_size
    assert config["layer_plan"] == recipe.layer_plan and config["d_model"] == recipe.d_model
    assert config["kv_bytes_per_token"] == model.cache_bytes(1, 1).kv_bytes > 0
    assert config["state_bytes_per_sequence"] == model.cache_bytes(1, 0).state_bytes > 0
    assert config["fsc_version"] and config["dtype"] == "fp32"

    card = (d / "README.md").read_text()
    front = yaml.safe_load(card.split("---")[1])
    assert front["library_name"] == "fsc" and front["license"] == "other"
    assert {"fsc", "hybrid", "mamba", "attention", "block-diffusion"} <= set(front["tags"])
    assert recipe.layer_map in card and f"{config['kv_bytes_per_token']:,} bytes" in card


def test_load_gives_back_identical_weights_without_unpickling(tmp_path, monkeypatch):
    model = build_model(load_recipe("tiny_hybrid"), seed=5)
    save_checkpoint(model, tmp_path / "c")
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    recipe, loaded = load_checkpoint(tmp_path / "c")
    assert recipe.recipe_hash == model.recipe.recipe_hash and not loaded.training
    assert _state_equal(model, loaded)
    _, low = load_checkpoint(tmp_path / "c", dtype=torch.bfloat16)
    assert {p.dtype for p in low.parameters()} == {torch.bfloat16} and low.dtype == torch.bfloat16


def test_forced_small_shards_give_an_index_and_load_back_identically(tmp_path):
    model = build_model(load_recipe("tiny_hybrid"), seed=2)
    limit = 300_000
    info = save_checkpoint(model, tmp_path / "s", max_shard_bytes=limit)
    d = tmp_path / "s"
    shards = sorted(p.name for p in d.glob("model-*.safetensors"))
    assert len(shards) >= 3 and shards == info.weight_files
    assert shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    assert not (d / "model.safetensors").exists()
    index = json.loads((d / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"]) == set(model.state_dict())
    assert index["metadata"]["total_size"] == info.weight_bytes
    for shard in shards:
        tensors = load_file(d / shard)
        shard_bytes = sum(t.numel() * t.element_size() for t in tensors.values())
        assert len(tensors) == 1 or shard_bytes <= limit
    assert _state_equal(model, load_checkpoint(d)[1])
    assert verify_checkpoint(d).n_params == info.n_params


def test_save_refuses_a_non_empty_destination_and_accepts_an_empty_one(tmp_path):
    model = build_model(load_recipe("tiny_attn"), seed=0)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError, match=r"busy: already exists"):
        save_checkpoint(model, tmp_path / "busy")
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    save_checkpoint(model, tmp_path / "empty")
    assert (tmp_path / "empty" / "model.safetensors").is_file()
    with pytest.raises(CheckpointError, match="meta device"):
        save_checkpoint(build_model(load_recipe("tiny_attn"), device="meta"), tmp_path / "m")


@pytest.mark.parametrize("victim", ["model-00002-of-00005.safetensors", "fsc_recipe.yaml",
                                    "config.json", "model.safetensors.index.json"])
def test_a_flipped_byte_is_caught_before_any_tensor_is_read(save_tiny, monkeypatch, victim):
    d = save_tiny(max_shard_bytes=400_000)
    assert (d / victim).exists()
    data = bytearray((d / victim).read_bytes())
    data[len(data) // 2] ^= 0x01
    (d / victim).write_bytes(bytes(data))

    def no_tensors(*a, **k):
        raise AssertionError("tensor data was read before the checksums were checked")

    monkeypatch.setattr("safetensors.torch.load_file", no_tensors)
    monkeypatch.setattr(ckpt_mod, "read_header", no_tensors)
    with pytest.raises(CheckpointError, match=rf"{victim}: sha256 .* does not match"):
        load_checkpoint(d)


def test_the_model_card_is_its_owners_and_not_verified(save_tiny):
    """The card asks its owner to set the license: an edited card (or one an older save
    listed in the checksums) loads; what it states of the weights is config.json's, which is
    verified."""
    d = save_tiny()
    assert "README.md" not in (d / CHECKSUMS_FILE).read_text()
    card = d / "README.md"
    card.write_text(card.read_text().replace("license: other", "license: apache-2.0"))
    load_checkpoint(d)
    with (d / CHECKSUMS_FILE).open("a") as f:  # as an older save listed it
        f.write(f"{'0' * 64}  README.md\n")
    load_checkpoint(d)


def test_missing_files_are_named(save_tiny):
    d = save_tiny(max_shard_bytes=400_000)
    (d / "model-00003-of-00005.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model-00003-of-00005.safetensors: missing"):
        load_checkpoint(d)
    (d / CHECKSUMS_FILE).unlink()
    with pytest.raises(CheckpointError, match=rf"{CHECKSUMS_FILE}: missing"):
        load_checkpoint(d)
    with pytest.raises(CheckpointError, match="no such checkpoint directory"):
        load_checkpoint(d / "nowhere")
    # a file of the checkpoint given for the checkpoint: said to be a file
    with pytest.raises(CheckpointError, match="a file, not a checkpoint directory"):
        load_checkpoint(d / "model-00001-of-00005.safetensors")


def _rewrite_weights(d, change) -> None:
    """Replace model.safetensors by change(tensors) and re-sign every file (checksums pass)."""
    tensors = change(load_file(d / "model.safetensors"))
    save_file(tensors, d / "model.safetensors", metadata={"format": "pt"})
    names = [p.name for p in d.iterdir() if p.name != CHECKSUMS_FILE]
    write_checksums(d, names)


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: {k: v for k, v in t.items() if k != "norm_f.weight"},
     r"model.safetensors: tensor 'norm_f.weight' of the recipe's model is missing"),
    (lambda t: {**t, "layers.9.extra": torch.zeros(2)},
     r"model.safetensors: tensor 'layers.9.extra' is not part of the recipe's model"),
    (lambda t: {**t, "embed.weight": t["embed.weight"][:-1].clone()},
     r"model.safetensors: tensor 'embed.weight' has shape \[287, 64\] but .* needs \[288, 64\]"),
    (lambda t: {**t, "lm_head.weight": t["lm_head.weight"].half()},
     r"model.safetensors: tensor 'lm_head.weight' has dtype F16 but .* needs F32"),
])
def test_tensors_that_do_not_match_the_recipe_are_named(save_tiny, change, message):
    d = save_tiny()
    _rewrite_weights(d, change)
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(d)


def test_checksum_file_names_cannot_leave_the_directory(save_tiny, snapshot):
    d = save_tiny()
    before = snapshot(d)
    lines = (d / CHECKSUMS_FILE).read_text() + f"{'0' * 64}  ../outside.txt\n"
    (d / CHECKSUMS_FILE).write_text(lines)
    with pytest.raises(CheckpointError, match=re.escape("'../outside.txt' is not an allowed")):
        load_checkpoint(d)
    assert set(snapshot(d)) == set(before)


def test_checkpoint_files_are_canonical(tmp_path):
    """safetensors writes its metadata from a hash map whose order changes from process to
    process; fsc rewrites it sorted, so equal weights give equal bytes (and checksums)."""
    import json as js

    import torch as tt
    from safetensors.torch import load_file, save_file

    from fsc.checkpoint.io import canonical_header

    path = tmp_path / "w.safetensors"
    save_file({"b": tt.ones(3), "a": tt.zeros(2)}, path, metadata={"z": "1", "format": "pt"})
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    head = js.loads(raw[8 : 8 + n])
    shuffled = {"__metadata__": {"z": "1", "format": "pt"}, **{k: v for k, v in head.items()
                                                               if k != "__metadata__"}}
    body = js.dumps(shuffled, separators=(",", ":")).encode()
    path.write_bytes(raw[:8] + body + b" " * (n - len(body)) + raw[8 + n :])
    canonical_header(path)
    fixed = path.read_bytes()
    assert list(js.loads(fixed[8 : 8 + n])["__metadata__"]) == ["format", "z"]
    assert len(fixed) == len(raw) and load_file(path)["b"].tolist() == [1.0, 1.0, 1.0]
    canonical_header(path)
    assert path.read_bytes() == fixed  # idempotent
