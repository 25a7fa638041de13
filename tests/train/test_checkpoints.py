"""Checkpoints a run keeps without being asked: rolling saves by wall time, pruned to --keep;
--save-every milestones stay; a save cut short leaves `latest` on a whole checkpoint."""

import json

import pytest

from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.source import resolve_checkpoint
from fsc.tokenizer import ByteTokenizer
from fsc.train import loop
from fsc.train.loop import TrainConfig, Trainer
from fsc.train.state import read_state


def _trainer(out, steps, **options) -> Trainer:
    recipe = load_recipe("tiny_attn")
    cfg = TrainConfig(source="tiny_attn", data="copy", seq_len=32, steps=steps, out=str(out),
                      batch=2, warmup=1, log_every=100, **options)
    return Trainer(cfg, recipe, build_model(recipe, seed=0), ByteTokenizer())


def _steps(out) -> list[int]:
    return sorted(int(d.name.removeprefix("step-")) for d in out.glob("step-*"))


def _milestone(out, step) -> bool:
    return json.loads((out / f"step-{step:06d}" / loop.STATE_JSON).read_text())["milestone"]


def test_rolling_saves_come_every_ten_minutes_by_default(tmp_path):
    trainer = _trainer(tmp_path, steps=8)
    assert trainer.cfg.save_every == 0 and trainer.cfg.save_minutes == 10
    trainer.clock = lambda: trainer.step * 4 * 60.0  # each step takes four minutes
    trainer.run()
    assert _steps(tmp_path) == [3, 6, 8]  # 12 minutes after the start, 12 after that, the end
    assert not _milestone(tmp_path, 3) and not _milestone(tmp_path, 6) and _milestone(tmp_path, 8)
    assert resolve_checkpoint(tmp_path).name == "step-000008"


def test_keep_prunes_the_oldest_rolling_saves_and_never_a_milestone(tmp_path):
    trainer = _trainer(tmp_path, steps=10, save_every=4, save_minutes=1, keep=2)
    trainer.clock = lambda: trainer.step * 60.0  # a rolling save after every step
    res = trainer.run()
    assert _steps(tmp_path) == [4, 7, 8, 9, 10]  # milestones 4, 8 and the last; rolling 7, 9
    assert res.checkpoint.endswith("step-000010") and not res.interrupted


def test_the_processes_agree_on_stops_and_rolling_saves_in_one_all_reduce_a_step(tmp_path,
                                                                                 monkeypatch):
    """Each step's end asks the processes one question (a stop signal, a reached --stop-at, a
    rolling save due), not one for the stops and another for the save; the saves are those
    of the clock, as before."""
    asked = []
    real = loop.parallel.largest
    monkeypatch.setattr(loop.parallel, "largest",
                        lambda values, *a: asked.append(values) or real(values, *a))
    trainer = _trainer(tmp_path, steps=5, save_minutes=1, keep=0)
    trainer.clock = lambda: trainer.step * 30.0  # half a minute a step
    trainer.run()
    assert _steps(tmp_path) == [2, 4, 5]
    assert [len(v) for v in asked] == [3] * 6  # before each of 5 steps, and after the last


def test_keep_0_keeps_every_rolling_save(tmp_path):
    trainer = _trainer(tmp_path, steps=4, save_minutes=1, keep=0)
    trainer.clock = lambda: trainer.step * 60.0
    trainer.run()
    assert _steps(tmp_path) == [1, 2, 3, 4]


def test_a_save_cut_short_leaves_latest_on_the_last_whole_checkpoint(tmp_path, monkeypatch):
    trainer = _trainer(tmp_path, steps=6, save_minutes=0)
    trainer.run(stop_after=2)
    real = loop.save_file

    def dies(*args, **kwargs):
        raise OSError("no space left")  # cut short while writing the training state

    monkeypatch.setattr(loop, "save_file", dies)
    trainer.train_step()
    with pytest.raises(OSError):
        trainer.save()
    assert _steps(tmp_path) == [2]
    state, _ = read_state(resolve_checkpoint(tmp_path))
    assert state["step"] == 2

    # What a kill -9 mid-save leaves (a hidden directory) goes with the next save.
    leftover = tmp_path / ".step-000003.save-x1y2"
    (leftover / "sub").mkdir(parents=True)
    monkeypatch.setattr(loop, "save_file", real)
    trainer.save()
    assert not leftover.exists() and _steps(tmp_path) == [2, 3]
    assert resolve_checkpoint(tmp_path).name == "step-000003"


def test_the_options_say_their_defaults_and_refuse_bad_values(fsc_main, tmp_path):
    text = " ".join(fsc_main("train", "--help", check=0).stdout.split())
    assert "--save-minutes" in text and "10.0" in text and "--keep" in text and "default 3" in text
    res = fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "2",
                   "--out", tmp_path / "o", "--save-minutes", "-1")
    assert res.returncode == 2 and "--save-minutes" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_a_resumed_run_may_change_its_saving(fsc_main, tmp_path):
    common = ["--store", tmp_path / "s"]
    fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2",
             "--train-steps", "4", "--stop-after", "1", "--out", tmp_path / "o", *common, check=0)
    fsc_main("train", "--resume", tmp_path / "o", "--save-minutes", "0", "--keep", "5",
             "--stop-after", "1", *common, check=0)
    cfg = read_state(resolve_checkpoint(tmp_path / "o"))[0]["config"]
    assert (cfg["save_minutes"], cfg["keep"], cfg["save_every"]) == (0, 5, 0)


@pytest.mark.parametrize("at, stopped", [(2, True), (4, False)])
def test_a_stop_signal_ends_the_run_after_the_step_under_way_saved(tmp_path, at, stopped):
    """SIGTERM in step 2 of 4: the step finishes, is saved (a rolling save) and the run says
    it was interrupted; in the last step it stops nothing."""
    import os
    import signal

    trainer = _trainer(tmp_path, steps=4, save_minutes=0)

    def on_step(step, loss, rate):
        if step == at:
            os.kill(os.getpid(), signal.SIGTERM)

    trainer.on_step = on_step
    res = trainer.run()
    assert (res.step, res.interrupted) == (at, stopped)
    assert res.stop_signal == (signal.SIGTERM if stopped else 0)
    assert _steps(tmp_path) == [at] and _milestone(tmp_path, at) is not stopped
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the handler went with the run


def test_every_command_that_takes_a_checkpoint_takes_a_training_dir(fsc_main, tmp_path):
    """decode, verify, build and estimate read a training directory (or its `latest`) as its
    newest step, as train and eval do."""
    run = tmp_path / "run"
    fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "2",
             "--batch", "2", "--out", run, "--store", tmp_path / "st", check=0)
    for ref in (run, run / "latest"):
        doc = json.loads(fsc_main("decode", ref, "--prompt", "ab", "--length", "4", "--json",
                                  check=0).stdout)
        assert "untrained" not in doc["stats"]["weights"]  # the checkpoint's, not seeded ones
    assert fsc_main("build", run, "--json").returncode == 0
    assert fsc_main("estimate", run / "latest", "--json").returncode == 0
    assert fsc_main("verify", run, "--blocks", "2").returncode == 0


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_resuming_a_step_with_later_steps_beside_it_is_refused(fsc_main, tmp_path):
    """A resumed run that re-stretches the schedule trains other weights at steps the directory
    already holds; it kept the old ones under those names. Refused in one line, nothing written;
    a copy of the step in a directory of its own resumes, as does the newest step named."""
    import shutil

    out, common = tmp_path / "o", ["--store", tmp_path / "s"]
    fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2",
             "--train-steps", "4", "--save-every", "2", "--out", out, *common, check=0)
    res = fsc_main("train", "--resume", out / "step-000002", "--train-steps", "6", *common)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert "holds later steps (step-000004)" in res.stderr
    assert _steps(out) == [2, 4] and (out / "latest").read_text().strip() == "step-000004"
    branch = tmp_path / "branch"
    branch.mkdir()
    shutil.copytree(out / "step-000002", branch / "step-000002")
    fsc_main("train", "--resume", branch / "step-000002", "--train-steps", "6", *common, check=0)
    assert _steps(branch) == [2, 4, 6] and _steps(out) == [2, 4]  # --save-every 2 kept
    fsc_main("train", "--resume", out / "step-000004", "--train-steps", "6", *common, check=0)
    assert _steps(out) == [2, 4, 6]


def test_a_run_stopped_between_logged_steps_logs_the_step_it_ended_at(tmp_path):
    """A stop signal at step 7 of a run logging every 5: the store held steps 1 and 5, so
    `fsc runs` said it got to step 5 while its checkpoint (and --resume) is at 7."""
    import os
    import signal

    trainer = _trainer(tmp_path, steps=20, save_minutes=0)
    trainer.cfg.log_every = 5
    logged = []
    trainer.on_log = lambda row: logged.append(row.step)
    trainer.on_step = lambda step, *a: step == 7 and os.kill(os.getpid(), signal.SIGUSR1)
    res = trainer.run()
    assert res.interrupted and res.step == 7 and _steps(tmp_path) == [7]
    assert logged == [1, 5, 7]
