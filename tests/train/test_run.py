"""fsc.train.run without the command line: a job planned, checked and trained into a store (the
run, a row per logged step as TrainStep encodes it, the checkpoints registered, the summary);
a resumed job keeps its settings; the launcher leaves --nproc out of the workers' command."""

import json

import pytest

from fsc.errors import NothingToDo, UsageError
from fsc.store import Store
from fsc.store.store import ROW_TABLES
from fsc.train.launch import without_nproc
from fsc.train.loop import TrainStep
from fsc.train.run import new_job, resumed_job, train

SETTINGS = {"data": "copy", "seq_len": 16, "steps": 4, "batch": 2, "log_every": 2,
            "save_minutes": 0.0}


def test_a_train_step_row_is_the_train_steps_columns():
    step = TrainStep("tiny_attn", "h", "frontier", "copy", 3, 2.5, 1e-3, 1.0, 96, 10.0, 0.5)
    assert tuple(step.row()) == ROW_TABLES["train_steps"]
    assert step.row()["eval_accuracy"] is None and step.row()["step"] == 3


def test_train_records_the_run_its_steps_and_checkpoints(tmp_path):
    st = Store(tmp_path / "store")
    job = new_job("tiny_attn", None, None, out=str(tmp_path / "run"), device="cpu", **SETTINGS)
    assert (job.cfg.objective, job.cfg.warmup) == ("frontier", 0)
    trained = train(job, "cpu", st, "fsc train tiny_attn")
    doc = trained.summary()
    assert doc["run_id"] == trained.run_id and doc["step"] == 4 and not doc["interrupted"]
    assert len(trained.losses) == 4 and doc["first_loss"] == trained.losses[0]
    _, runs = st.query("SELECT kind, status, error, command FROM runs")
    assert runs == [("train", "finished", None, "fsc train tiny_attn")]
    _, steps = st.query("SELECT step, recipe, objective, data FROM train_steps ORDER BY step")
    assert steps == [(s, "tiny_attn", "frontier", "copy") for s in (1, 2, 4)]  # first, every 2nd
    assert [a["path"].rsplit("/", 1)[-1] for a in st.artifacts()] == ["step-000004"]


def test_a_resumed_job_keeps_its_settings_and_takes_the_changes(tmp_path):
    out = tmp_path / "run"
    train(new_job("tiny_attn", "ar", 1, out=str(out), device="cpu", **SETTINGS), "cpu",
          Store(tmp_path / "store"), "fsc train", stop_after=2)
    job = resumed_job(out, "cpu", 6, None, {"log_every": 3})
    assert (job.cfg.steps, job.cfg.log_every, job.cfg.objective, job.cfg.warmup) == (6, 3, "ar", 1)
    assert job.recipe.block_size == 1 and job.state[0]["step"] == 2
    with pytest.raises(UsageError, match="--train-steps 1 is below the 2 steps"):
        resumed_job(out, "cpu", 1, None, {})
    with pytest.raises(UsageError, match="--nproc 2: the run trains with 1 process"):
        resumed_job(out, "cpu", None, 2, {})


def test_a_finished_run_resumed_is_a_no_op(tmp_path, fsc_main):
    out, store = tmp_path / "run", tmp_path / "store"
    train(new_job("tiny_attn", "ar", 1, out=str(out), device="cpu", **SETTINGS), "cpu",
          Store(store), "fsc train")
    with pytest.raises(NothingToDo, match="at step 4 of 4: the run is done"):
        resumed_job(out, "cpu", None, None, {})
    res = fsc_main("train", "--resume", out, "--store", store)
    assert res.returncode == 0 and "nothing to do" in res.stderr
    res = fsc_main("train", "--resume", out, "--store", store, "--json")
    doc = json.loads(res.stdout)  # a reader of stdout gets a document
    assert res.returncode == 0 and (doc["checkpoint"], doc["step"]) == (
        str(out / "step-000004"), 4)
    _, [(n,)] = Store(store).query("select count(*) from runs")
    assert n == 1  # nothing recorded
    assert resumed_job(out, "cpu", 6, None, {}).cfg.steps == 6  # further: a new schedule


def test_the_workers_command_leaves_nproc_out():
    args = ["train", "tiny_attn", "--nproc", "2", "--train-steps", "4", "--nproc=3", "--json"]
    assert without_nproc(args) == ["train", "tiny_attn", "--train-steps", "4", "--json"]
