"""`fsc train --freeze KIND`: the mixers of one kind keep the weights the run starts from (a
checkpoint's, or their initialisation), while every other weight trains; a run so frozen
resumes bit-exact; a kind the recipe lacks is one line, exit 2, before anything is written."""

import json

import pytest
import torch
from safetensors.torch import load_file

COMMON = ["--data", "copy", "--seq-len", "16", "--batch", "2", "--lr", "1e-2", "--seed", "3"]


def _weights(run, step):
    return load_file(run / f"step-{step:06d}" / "model.safetensors")


def _mamba_mixer(name: str) -> bool:  # tiny_hybrid: layers 0-2 Mamba-2, layer 3 attention
    return name.startswith(("layers.0.mixer.", "layers.1.mixer.", "layers.2.mixer."))


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_frozen_mixers_keep_the_checkpoints_weights_and_the_rest_trains(cli, tmp_path):
    store = ["--store", tmp_path / "store"]
    r = cli("train", "tiny_hybrid", *COMMON, "--train-steps", "2", "--out", tmp_path / "start",
            *store)
    assert r.code == 0, r.err
    start = _weights(tmp_path / "start", 2)
    r = cli("train", tmp_path / "start", *COMMON, "--train-steps", "4", "--freeze", "mamba",
            "--out", tmp_path / "frozen", *store)
    assert r.code == 0, r.err
    frozen = _weights(tmp_path / "frozen", 4)
    kept = [k for k in start if _mamba_mixer(k)]
    assert kept and all(torch.equal(start[k], frozen[k]) for k in kept)
    moved = [k for k in start if not _mamba_mixer(k) and not torch.equal(start[k], frozen[k])]
    assert any(k.startswith("layers.3.mixer.") for k in moved)  # attention trains
    assert any(k.startswith("layers.0.ffn.") for k in moved)  # so do the frozen layers' MoEs
    assert "embed.weight" in moved
    config = json.loads((tmp_path / "frozen" / "step-000004" / "config.json").read_text())
    assert config["training"]["freeze"] == ["mamba"]
    card = (tmp_path / "frozen" / "step-000004" / "README.md").read_text()
    assert "Its mamba mixers were not trained: they kept the weights the run started from" in card
    # unfrozen, the same start trains the Mamba-2 mixers as well
    r = cli("train", tmp_path / "start", *COMMON, "--train-steps", "4", "--out",
            tmp_path / "free", *store)
    assert r.code == 0, r.err
    free = _weights(tmp_path / "free", 4)
    assert any(not torch.equal(start[k], free[k]) for k in kept)


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_frozen_run_resumes_bit_exact_and_stays_frozen(cli, tmp_path):
    common = ["tiny_hybrid", *COMMON, "--train-steps", "4", "--freeze", "attention",
              "--store", tmp_path / "store"]
    r = cli("train", *common, "--out", tmp_path / "whole")
    assert r.code == 0, r.err
    r = cli("train", *common, "--out", tmp_path / "split", "--stop-after", "2")
    assert r.code == 0, r.err
    r = cli("train", "--resume", tmp_path / "split", "--store", tmp_path / "store")
    assert r.code == 0, r.err
    a, b = _weights(tmp_path / "whole", 4), _weights(tmp_path / "split", 4)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    first = _weights(tmp_path / "split", 2)
    attention = [k for k in a if k.startswith("layers.3.mixer.")]
    assert attention and all(torch.equal(first[k], a[k]) for k in attention)
    r = cli("train", "--resume", tmp_path / "split", "--freeze", "mamba", "--store",
            tmp_path / "store")
    assert r.code == 2 and "--resume keeps the run's settings; drop --freeze" in r.err, r.err


@pytest.mark.parametrize("freeze, line", [
    ("gla", "--freeze gla: tiny_hybrid has no gla layer (its mixers: attention, mamba)"),
    ("mamba,mamba", "--freeze mamba,mamba: a kind given twice"),
    (",", "--freeze: name a mixer kind"),
])
def test_a_kind_the_recipe_lacks_is_one_line_and_writes_nothing(cli, tmp_path, freeze, line):
    r = cli("train", "tiny_hybrid", *COMMON, "--train-steps", "2", "--freeze", freeze,
            "--out", tmp_path / "out", "--store", tmp_path / "store")
    assert r.code == 2 and line in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not (tmp_path / "out").exists() and not (tmp_path / "store").exists()
