"""`fsc train --state-passing`: each step starts its recurrent layers from the states the
previous step's sequences ended in; the states go into the training state, so a resumed run is
bit-identical to one that was not stopped; what cannot pass a state is refused in one line."""

import json

import pytest
import torch
from safetensors.torch import load_file

from fsc.model.lm import build_model
from fsc.objective import Batch
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer
from fsc.train.loop import TrainConfig, Trainer

COPY = ["--data", "copy", "--seq-len", "32", "--batch", "4", "--objective", "blocks"]


def _weights(step_dir):
    return load_file(step_dir / "model.safetensors")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_resumed_state_passing_is_bit_identical_and_differs_from_none(fsc_main, tmp_path):
    store = ["--store", tmp_path / "store"]
    run = ["train", "tiny_mamba", *COPY, "--train-steps", "6", *store]
    fsc_main(*run, "--state-passing", "--out", tmp_path / "whole", check=0)
    fsc_main(*run, "--state-passing", "--out", tmp_path / "split", "--stop-after", "3", check=0)
    state = load_file(tmp_path / "split" / "step-000003" / "training_state.safetensors")
    assert sorted(k for k in state if k.startswith("carry.")) == [
        f"carry.0.{i}.{n}" for i in range(2) for n in ("conv", "ssm")]
    fsc_main("train", "--resume", tmp_path / "split", *store, check=0)
    fsc_main(*run, "--out", tmp_path / "plain", check=0)
    a, b = _weights(tmp_path / "whole" / "step-000006"), _weights(tmp_path / "split" / "step-000006")
    plain = _weights(tmp_path / "plain" / "step-000006")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], plain[k]) for k in a)
    # the checkpoint says how its weights were made: state passing, the loss weighting
    whole, plain = (json.loads((tmp_path / run / "step-000006" / "config.json").read_text())
                    ["training"] for run in ("whole", "plain"))
    assert whole["state_passing"] is True and "state_passing" not in plain
    assert whole["weighting"] == plain["weighting"] == "elbo"
    card = (tmp_path / "whole" / "step-000006" / "README.md").read_text()
    assert "(objective `blocks`, loss weighting `elbo`," in card and "(--state-passing)" in card


@torch.no_grad()
def _folded_states(model, tokens, G):
    cache = model.empty_cache(tokens.shape[0], tokens.shape[1], block_size=G)
    for s in range(0, tokens.shape[1], G):
        model.fold(tokens[:, s : s + G], cache)
    return cache


def test_a_step_starts_where_the_previous_batch_ended(tmp_path):
    """After step 0 the trainer holds, for every layer of the hybrid, what a fold of step 0's
    sequences leaves with the weights step 0 read (attention: nothing)."""
    recipe = load_recipe("passkey_hybrid")
    model = build_model(recipe, seed=0)
    before = build_model(recipe, seed=0).eval()
    cfg = TrainConfig(source="passkey_hybrid", data="copy", seq_len=32, steps=2, out=str(tmp_path),
                      objective="blocks", batch=3, warmup=1, state_passing=True)
    trainer = Trainer(cfg, recipe, model, ByteTokenizer())
    trainer.train_step()
    batch = Batch.of([trainer.data.sample(j) for j in range(3)], "cpu")
    cache = _folded_states(before, batch.tokens, recipe.block_size)
    ends = trainer.carried[0]
    for layer, end, lc in zip(model.layers, ends, cache.layers):
        if layer.mixer.kind == "attention":
            assert end is None
            continue
        for name, t in lc.tensors.items():
            torch.testing.assert_close(end[name], t, rtol=1e-4, atol=1e-5)
            assert not end[name].requires_grad


def test_what_cannot_pass_a_state_is_refused(cli, tmp_path):
    for args, said in [
        (["passkey_hybrid_swa", *COPY], "error: --state-passing: layer 0 (windowed attention) "
                                        "cannot start from a passed state"),
        (["tiny_mamba", "--data", "copy", "--seq-len", "32", "--objective", "frontier"],
         "error: --state-passing needs --objective blocks or ar"),
    ]:
        r = cli("train", *args, "--train-steps", "2", "--state-passing", "--out", tmp_path / "x",
                "--store", tmp_path / "store")
        assert r.code == 2 and r.err.strip().startswith(said), r.err
        assert len(r.err.strip().splitlines()) == 1
