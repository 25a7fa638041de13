"""`fsc train` checks the memory a step needs before it prepares data; an allocation that
fails at run time is one line that names memory; its checkpoints are listed by `fsc artifacts`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fsc.costmodel import param_counts
from fsc.costmodel.training import training_memory
from fsc.errors import UsageError
from fsc.recipe import load_recipe
from fsc.train.fits import check_training_fits

HUGE = ["train", "tiny_attn", "--data", "copy", "--seq-len", "16777216", "--batch", "2",
        "--train-steps", "1"]


def test_training_memory_counts_optimizer_state_activations_masks_and_logits():
    r = load_recipe("tiny_attn")
    m = training_memory(r, 256, 8)
    assert m.state_bytes == 16 * param_counts(r)["total"]  # fp32 weights, grads, 2 moments
    assert m.mask_bytes == r.n_layers * 256 * 256
    assert m.logits_bytes == 2 * 4 * 8 * 256 * r.vocab_size
    assert m.total_bytes == m.state_bytes + m.activation_bytes + m.mask_bytes + m.logits_bytes
    twice = training_memory(r, 256, 16)
    assert twice.activation_bytes == 2 * m.activation_bytes
    assert training_memory(load_recipe("tiny_mamba"), 256, 8).mask_bytes == 0


def test_a_step_that_fits_passes_and_one_that_does_not_is_named():
    r = load_recipe("tiny_attn")
    need = training_memory(r, 256, 8).total_bytes
    check_training_fits(r, "cpu", 256, 8, budget=need)
    with pytest.raises(UsageError) as e:
        check_training_fits(r, "cpu", 256, 8, budget=need - 1)
    assert "not enough memory to train tiny_attn at --seq-len 256, --batch 8" in str(e.value)
    with pytest.raises(UsageError):  # two CPU processes hold two copies of the state
        check_training_fits(r, "cpu", 256, 8, nproc=2, budget=need)


def test_train_refuses_a_step_too_large_before_preparing_data(cli, tmp_path, monkeypatch):
    def never(*_a, **_k):
        raise AssertionError("data prepared before the memory check")

    monkeypatch.setattr("fsc.data.sources.open_data", never)
    r = cli(*HUGE, "--out", tmp_path / "x", "--store", tmp_path / "store")
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert "not enough memory" in r.err and "lower --seq-len or --batch" in r.err


def test_an_allocation_failing_at_run_time_is_one_line_naming_memory(cli, tmp_path,
                                                                     monkeypatch):
    def fail(*_a, **_k):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                           "can't allocate memory: you tried to allocate 6565007360 bytes.\nmore")

    monkeypatch.setattr("fsc.data.sources.open_data", fail)
    r = cli("train", "tiny_attn", "--data", "copy", "--seq-len", "16", "--batch", "2",
            "--train-steps", "1", "--out", tmp_path / "x", "--store", tmp_path / "store")
    assert r.code == 1 and r.err.count("\n") == 1, r.err
    assert r.err.startswith("error: out of memory (") and "internal error" not in r.err


def test_warmup_longer_than_the_run_is_refused(cli, tmp_path):
    r = cli("train", "tiny_attn", "--data", "copy", "--seq-len", "16", "--train-steps", "1",
            "--warmup", "1000", "--out", tmp_path / "x", "--store", tmp_path / "store")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "--warmup 1000 is longer than --train-steps 1" in r.err
    assert not (tmp_path / "x").exists()


def test_artifacts_lists_the_checkpoints_train_wrote_by_recipe_name(cli, tmp_path):
    store = tmp_path / "store"
    assert cli("train", "tiny_attn", "--data", "copy", "--seq-len", "16", "--batch", "2",
               "--train-steps", "2", "--save-every", "1", "--out", tmp_path / "run",
               "--store", store).code == 0
    r = cli("artifacts", "--json", "--store", store)
    rows = json.loads(r.out)
    assert [Path(row["path"]).name for row in rows] == ["step-000001", "step-000002"]
    assert all(row["action"] == "saved" and row["recipe"] == "tiny_attn" for row in rows)
    table = cli("artifacts", "--store", store).out
    assert "tiny_attn" in table and rows[0]["recipe_hash"] not in table


def test_each_cpu_process_holds_its_own_batch_and_the_message_adds_up():
    """--batch is each process's: N processes hold N states and N batches' activations. The
    check counted one batch's activations for all, and the message's parts summed to one
    process's need while its total was N copies of the state besides."""
    r = load_recipe("tiny_attn")
    mem = training_memory(r, 256, 8)
    check_training_fits(r, "cpu", 256, 8, nproc=2, budget=2 * mem.total_bytes)
    with pytest.raises(UsageError) as e:
        check_training_fits(r, "cpu", 256, 8, nproc=2, budget=mem.total_bytes + mem.state_bytes)
    said = str(e.value)
    assert "(2 processes, each weights and optimizer" in said and said.endswith(
        "lower --seq-len or --batch or --nproc")
