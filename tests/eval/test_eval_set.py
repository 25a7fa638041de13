"""fsc eval --set KEY=VALUE: a checkpoint scored with a recipe field that changes no weight set
otherwise (attention.logn, attention.window, attention.rope_theta, state_dtype): the same
tensors read another way, rows under the recipe named for the change, kept by --resume; bad
items refused in one line before any model is loaded."""

import json

import pytest
import torch
from model_checks import mixing_model
from stops import stop_at_second_length as _stop_at_second_length

from fsc.checkpoint.io import save_checkpoint
from fsc.eval.tasks import model_to_score
from fsc.model.lm import build_model
from fsc.recipe import load_recipe, parse_changes
from fsc.store import Store


@torch.no_grad()
def test_the_model_scored_is_the_checkpoints_weights_under_the_changed_recipe(tmp_path):
    save_checkpoint(build_model(load_recipe("tiny_hybrid"), seed=3), tmp_path / "ck", seed=3)
    plain = model_to_score(str(tmp_path / "ck"), "cpu", 0, False)
    model = model_to_score(str(tmp_path / "ck"), "cpu", 0, False,
                           ("attention.logn=8", "attention.window=12"))
    assert model.recipe.name == "tiny_hybrid+attention.logn=8,attention.window=12"
    mixers = [layer.mixer for layer in model.layers if layer.mixer.kind == "attention"]
    assert mixers and all(m.logn == 8 and m.window == 12 for m in mixers)
    a, b = plain.state_dict(), model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    tokens = torch.randint(0, 256, (1, 32), generator=torch.Generator().manual_seed(0))
    want = build_model(load_recipe("tiny_hybrid").changed(
        parse_changes(["attention.logn=8", "attention.window=12"])), seed=3).eval()
    torch.testing.assert_close(model.forward_blockwise(tokens, [4] * 8),
                               want.forward_blockwise(tokens, [4] * 8), rtol=0, atol=0)
    assert not torch.equal(model.forward_blockwise(tokens, [4] * 8),
                           plain.forward_blockwise(tokens, [4] * 8))


def _scaled(name: str, folder) -> str:
    """A checkpoint of shipped recipe `name` whose mixers are scaled up (model_checks), so that
    what a --set changes reaches the loss by more than float noise; its path."""
    save_checkpoint(mixing_model(name), folder, seed=3)
    return str(folder)


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_rows_name_the_change_and_a_resume_keeps_it(fsc_main, tmp_path, monkeypatch):
    from fsc.eval import loss

    store = tmp_path / "store"
    args = [_scaled("tiny_attn", tmp_path / "ck"), "--task", "loss", "--data", "shakespeare", "--lengths", "64,128",
            "--samples", "2", "--store", store]
    whole = json.loads(fsc_main("eval", *args, "--set", "attention.logn=64", "--json").stdout)
    plain = json.loads(fsc_main("eval", *args, "--json").stdout)
    assert {r["recipe"] for r in whole["rows"]} == {"tiny_attn+attention.logn=64"}
    assert whole["rows"][0]["loss"] == plain["rows"][0]["loss"]  # within 64 tokens: unchanged
    real = _stop_at_second_length(monkeypatch)
    res = fsc_main("eval", *args, "--set", "attention.logn=64", "--store", tmp_path / "s2")
    assert res.returncode == 143
    run = res.stderr.split(" of run ")[1].split()[0]
    monkeypatch.setattr(loss, "heldout_loss", real)
    again = json.loads(fsc_main("eval", "--resume", run, "--store", tmp_path / "s2",
                                "--json").stdout)
    assert [r["length"] for r in again["rows"]] == [128]
    assert again["rows"][0]["recipe"] == "tiny_attn+attention.logn=64"
    assert again["rows"][0]["loss"] == whole["rows"][1]["loss"]
    assert abs(whole["rows"][1]["loss"] - plain["rows"][1]["loss"]) > 1e-4  # not float noise
    _, hashes = Store(store).query("select distinct recipe_hash from eval_cells")
    assert len(hashes) == 2


@pytest.mark.parametrize("args, said", [
    (["--set", "d_model=8"], "--set d_model: not a field that changes no weight"),
    (["--set", "attention.logn"], "--set 'attention.logn': expected KEY=VALUE"),
    (["--set", "attention.logn=1"], "attention.logn: too small (got 1)"),
    (["--set", "attention.logn=8", "--set", "attention.logn=9"], "--set attention.logn: given twice"),
    (["--set", "state_dtype=fp8"], "state_dtype"),
    (["--task", "harness", "--tasks", "x", "--set", "attention.logn=8"], "--set: not used by"),
    (["--export", "OUT", "--task", "niah", "--set", "attention.logn=8"], "--export writes prompts"),
])
def test_bad_changes_are_one_line_before_any_model(cli, tmp_path, args, said):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    res = cli("eval", "tiny_attn", *args, "--store", tmp_path / "store")
    assert res.code == 2 and said in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert not (tmp_path / "store").exists() and not (tmp_path / "out").exists()


def test_a_section_the_recipe_lacks_is_named(cli, tmp_path):
    res = cli("eval", "tiny_mamba", "--set", "attention.logn=8", "--store", tmp_path / "store")
    assert res.code == 2 and "tiny_mamba has no attention section" in res.err


def test_a_decay_scale_at_the_command_line_reaches_the_score(fsc_main, tmp_path):
    """mamba.decay_scale through `fsc eval --set`: exit 0, its own rows, another held-out loss."""
    args = [_scaled("tiny_mamba", tmp_path / "ck"), "--task", "loss", "--data", "shakespeare", "--lengths", "64",
            "--samples", "2", "--store", tmp_path / "store", "--json"]
    plain = json.loads(fsc_main("eval", *args).stdout)["rows"][0]
    res = fsc_main("eval", *args, "--set", "mamba.decay_scale=0.5")
    assert res.returncode == 0, res.stderr
    slow = json.loads(res.stdout)["rows"][0]
    assert slow["recipe"] == "tiny_mamba+mamba.decay_scale=0.5"
    assert abs(slow["loss"] - plain["loss"]) > 1e-3  # not float noise


def test_a_decay_by_position_changes_the_score_only_past_its_start(fsc_main, tmp_path):
    """mamba.decay_from through `fsc eval --set`: at 64 tokens a start of 64 scores what the
    plain recipe scores (nothing past it), a start of 16 (power 0.5) another loss."""
    args = [_scaled("tiny_mamba", tmp_path / "ck"), "--task", "loss", "--data", "shakespeare", "--lengths", "64",
            "--samples", "2", "--store", tmp_path / "store", "--json"]
    plain = json.loads(fsc_main("eval", *args).stdout)["rows"][0]
    within = json.loads(fsc_main("eval", *args, "--set", "mamba.decay_from=64").stdout)["rows"][0]
    res = fsc_main("eval", *args, "--set", "mamba.decay_from=16", "--set", "mamba.decay_power=0.5")
    assert res.returncode == 0, res.stderr
    past = json.loads(res.stdout)["rows"][0]
    assert within["loss"] == plain["loss"] and within["recipe"] == "tiny_mamba+mamba.decay_from=64"
    assert past["recipe"] == "tiny_mamba+mamba.decay_from=16,mamba.decay_power=0.5"
    assert abs(past["loss"] - plain["loss"]) > 1e-3  # not float noise


def test_a_decay_power_without_its_start_is_refused(cli, tmp_path):
    res = cli("eval", "tiny_mamba", "--set", "mamba.decay_power=0.5", "--store", tmp_path / "store")
    assert res.code == 2 and "decay_from" in res.err and len(res.err.strip().splitlines()) == 1


def test_the_help_names_every_key_set_takes(cli, monkeypatch):
    from fsc.recipe import WEIGHT_FREE

    monkeypatch.setenv("COLUMNS", "400")
    r = cli("eval", "--help")
    assert r.code == 0
    text = " ".join(r.out.split())
    assert all(key in text for key in WEIGHT_FREE) and "mamba.max_half_life" in WEIGHT_FREE
