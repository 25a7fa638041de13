"""One fsc train at a time per training directory: a second one (a resume started twice, a
requeue while the first still runs, a new run into the same --out) is refused in one line
before it trains a step, and the first one's checkpoints stay as they were."""

import fcntl
import os
from contextlib import contextmanager

import pytest

from fsc.errors import UsageError
from fsc.train.run import resumed_job, sole_trainer

COPY = ["tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2"]


@contextmanager
def _held(folder):
    """The directory held as a running fsc train holds it (another open file description, so
    the lock conflicts within this process too)."""
    folder.mkdir(exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        yield
    finally:
        os.close(fd)


def _refused(res) -> None:
    assert res.returncode == 2, res.stderr
    said = " ".join(res.stderr.split())
    assert len(res.stderr.splitlines()) == 1, res.stderr
    assert "another fsc train is training into it now" in said, said


def test_a_resume_while_the_run_trains_is_refused(fsc_main, tmp_path, snapshot):
    st = ["--store", tmp_path / "st"]
    fsc_main("train", *COPY, "--train-steps", "6", "--stop-after", "2", "--out", "run", *st,
             check=0)
    before = snapshot(tmp_path / "run" / "step-000002")
    with _held(tmp_path / "run"):
        _refused(fsc_main("train", "--resume", "run", *st))
        _refused(fsc_main("train", "--resume", "run/step-000002", *st))
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["latest", "step-000002"]
    assert snapshot(tmp_path / "run" / "step-000002") == before
    fsc_main("train", "--resume", "run", "--stop-after", "1", *st, check=0)  # let go: it goes on
    assert (tmp_path / "run" / "step-000003").is_dir()


def test_a_resume_of_a_run_that_has_saved_nothing_yet_is_refused_as_busy(fsc_main, tmp_path):
    """It said the folder held no training state, as if it were no run."""
    with _held(tmp_path / "run"):
        _refused(fsc_main("train", "--resume", "run", "--store", tmp_path / "st"))
    assert list((tmp_path / "run").iterdir()) == []


def test_a_run_training_before_its_first_save_is_named_as_one(fsc_main, tmp_path):
    """fsc eval and fsc decode of a training directory whose run has saved nothing yet said it
    was no checkpoint, no training run and no published model: it is a live training run."""
    with _held(tmp_path / "run"):
        for args in (("eval", "run", "--task", "loss", "--data", "copy", "--store", "st"),
                     ("decode", "run", "--prompt", "hi", "--length", "4")):
            res = fsc_main(*args)
            said = " ".join(res.stderr.split())
            assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, said
            assert ("error: run: a training directory with no checkpoint saved yet: an fsc "
                    "train is training into it now (fsc runs lists it)") in said
    res = fsc_main("eval", "run", "--task", "loss", "--data", "copy", "--store", "st")
    assert "is a directory with no checkpoint in it" in res.stderr  # none trains into it now


def test_a_resume_of_nothing_saved_or_of_a_checkpoints_file_says_so(fsc_main, tmp_path):
    """`--resume DIR` of a directory holding nothing, or of a file in a step checkpoint, said
    "no training state", where other commands name the file's directory."""
    (tmp_path / "empty").mkdir()
    res = fsc_main("train", "--resume", "empty", "--store", "st")
    assert res.returncode == 2
    assert ("error: --resume empty: no checkpoint saved in it (no step-NNNNNN), so nothing to go "
            "on from; a run killed before its first save trains again from the start (fsc "
            "train RECIPE ... --out empty)") in " ".join(res.stderr.split())
    fsc_main("train", *COPY, "--train-steps", "2", "--out", "run", "--store", "st", check=0)
    res = fsc_main("train", "--resume", "run/step-000002/model.safetensors", "--store", "st")
    assert res.returncode == 2
    assert ("error: --resume run/step-000002/model.safetensors: a file in the checkpoint "
            "run/step-000002; give that directory instead") in " ".join(res.stderr.split())


def test_a_new_run_into_a_directory_being_trained_is_refused(fsc_main, tmp_path):
    with _held(tmp_path / "run"):  # the first run has saved nothing yet: the folder is empty
        _refused(fsc_main("train", *COPY, "--train-steps", "2", "--out", "run",
                          "--store", tmp_path / "st"))
    assert list((tmp_path / "run").iterdir()) == []


def test_a_step_saved_after_the_job_read_the_directory_is_not_trained_over(fsc_main, tmp_path):
    """The first run ended between the second's reading of the directory and its lock: the
    second would train from a stale step, over the first one's newer checkpoints."""
    fsc_main("train", *COPY, "--train-steps", "6", "--stop-after", "2", "--out", "run",
             "--store", tmp_path / "st", check=0)
    job = resumed_job(tmp_path / "run", "cpu", None, None, {})
    (tmp_path / "run" / "step-000004").mkdir()  # saved by the other process meanwhile
    with pytest.raises(UsageError, match="another fsc train saved step-000004 after this"):
        with sole_trainer(job):
            pass


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_two_processes_one_directory(tmp_path):
    """The real thing: a second `fsc train --resume DIR` while the first process trains."""
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "FSC_STORE": str(tmp_path / "st")}
    first = subprocess.Popen([sys.executable, "-m", "fsc", "train", *COPY, "--train-steps",
                              "100000", "--save-every", "1", "--out", "run"], cwd=tmp_path,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):  # bounded: 60 s for a first step saved
            if (tmp_path / "run" / "latest").is_file() or first.poll() is not None:
                break
            time.sleep(0.1)
        assert (tmp_path / "run" / "latest").is_file()
        second = subprocess.run([sys.executable, "-m", "fsc", "train", "--resume", "run"],
                                cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=120)
        _refused(second)
        assert first.poll() is None  # the first one trains on
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=120)
    assert first.returncode == 128 + signal.SIGTERM  # ended as asked, saved and resumable


def test_the_store_names_the_training_directory_whole(fsc_main, tmp_path, monkeypatch):
    """A run resumed from another working directory, by another relative path, continues the
    same training: the store names its directory by its absolute path, so fsc plot draws the
    two as one curve (fsc.results.select.continued) and apart from other trainings."""
    from fsc.results.select import continued
    from fsc.store import Store

    st = ["--store", tmp_path / "st"]
    fsc_main("train", *COPY, "--train-steps", "4", "--stop-after", "2", "--out", "run", *st,
             check=0)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    fsc_main("train", "--resume", "../run", *st, check=0)
    store = Store(tmp_path / "st")
    _, rows = store.query("SELECT run_id, json_extract_string(config, '$.out') FROM runs "
                          "WHERE kind = 'train' ORDER BY started_at")
    (first, out1), (second, out2) = rows
    assert out1 == out2 == str(tmp_path / "run")
    assert continued(store, [second]) == {second: [(first, 2)]}
