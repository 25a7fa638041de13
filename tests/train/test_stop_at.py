"""`fsc train --stop-at ACC`: the run ends at the first in-loop eval whose exact match reaches
ACC, saved and finished; the in-loop evals are on the console and in --json; bad values are
one line and exit 2."""

import json

import pytest

from fsc.store import Store

COPY = ["tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "4"]


@pytest.fixture
def scripted_evals(monkeypatch):
    """The in-loop eval replaced by a script: exact match 0.5 until step 15, then 0.95."""
    import fsc.eval.retrieval as ev

    seen = []

    def fake(trainer):
        seen.append(trainer.step)
        return {"eval_accuracy": 0.5 if trainer.step < 15 else 0.95}

    monkeypatch.setattr(ev, "quick_eval", fake)
    return seen


def test_a_run_stops_at_the_first_eval_that_reaches_acc(fsc_main, tmp_path, scripted_evals):
    store = tmp_path / "store"
    res = fsc_main("train", *COPY, "--train-steps", "40", "--eval-every", "5", "--stop-at", "0.9",
                   "--out", tmp_path / "run", "--store", store, "--json", check=0)
    doc = json.loads(res.stdout)
    assert scripted_evals == [5, 10, 15]
    assert doc["step"] == 15 and doc["steps"] == 40 and doc["reached"] and doc["stop_at"] == 0.9
    assert doc["evals"] == [{"step": 5, "accuracy": 0.5}, {"step": 10, "accuracy": 0.5},
                            {"step": 15, "accuracy": 0.95}]
    assert doc["checkpoint"].endswith("step-000015")
    assert (tmp_path / "run" / "latest").read_text().strip() == "step-000015"
    assert "step 10: in-loop exact match 0.50" in res.stderr
    assert "continue with" not in res.stderr  # reached, not cut short
    _, [(status,)] = Store(store).query("select status from runs")
    assert status == "finished"


def test_the_console_summary_says_where_it_stopped(fsc_main, tmp_path, scripted_evals):
    res = fsc_main("train", *COPY, "--train-steps", "40", "--eval-every", "15", "--stop-at", "0.95",
                   "--out", tmp_path / "run", "--store", tmp_path / "store", check=0)
    assert "to step 15 of 40" in res.stdout
    assert "stopped at exact match 0.95 ≥ 0.95 at step 15" in res.stdout
    assert "step 15: in-loop exact match 0.95" in res.stderr


def test_acc_not_reached_trains_every_step(fsc_main, tmp_path, scripted_evals):
    res = fsc_main("train", *COPY, "--train-steps", "12", "--eval-every", "4", "--stop-at", "1",
                   "--out", tmp_path / "run", "--store", tmp_path / "store", "--json", check=0)
    doc = json.loads(res.stdout)
    assert doc["step"] == 12 and not doc["reached"] and len(doc["evals"]) == 3


@pytest.mark.parametrize("extra, message", [
    (["--stop-at", "0"], "must be > 0"),
    (["--stop-at", "1.5"], "must be <= 1"),
    (["--stop-at", "nan"], "not a finite number"),
    (["--stop-at", "abc"], "--stop-at"),
    (["--stop-at", "0.9"], "--stop-at 0.9 needs an in-loop eval: --eval-every N"),
])
def test_bad_stop_at_is_one_line_and_exit_2(fsc_main, tmp_path, extra, message):
    res = fsc_main("train", *COPY, "--train-steps", "5", "--out", tmp_path / "run",
                   "--store", tmp_path / "store", *extra)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "run").exists()


def test_stop_at_needs_a_task_with_answers(fsc_main, tmp_path):
    (tmp_path / "t.txt").write_text("the quick brown fox. " * 40)
    res = fsc_main("train", "tiny_attn", "--data", tmp_path / "t.txt", "--seq-len", "32",
                   "--train-steps", "5", "--eval-every", "1", "--stop-at", "0.5",
                   "--out", tmp_path / "run", "--store", tmp_path / "store")
    assert res.returncode == 2 and "on a task (passkey, mqar or copy)" in res.stderr


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_resume_keeps_or_changes_stop_at(fsc_main, tmp_path, scripted_evals):
    store = ["--store", tmp_path / "store"]
    fsc_main("train", *COPY, "--train-steps", "40", "--eval-every", "5", "--stop-at", "1",
             "--stop-after", "5", "--out", tmp_path / "run", *store, check=0)
    kept = json.loads(fsc_main("train", "--resume", tmp_path / "run", "--stop-after", "15",
                               *store, "--json", check=0).stdout)
    assert kept["stop_at"] == 1 and not kept["reached"] and kept["step"] == 20
    changed = json.loads(fsc_main("train", "--resume", tmp_path / "run", "--stop-at", "0.9",
                                  *store, "--json", check=0).stdout)
    assert changed["reached"] and changed["step"] == 25 and changed["stop_at"] == 0.9
