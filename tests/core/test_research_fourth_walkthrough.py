"""A study from a published config to a pushed checkpoint, on the CPU (import, shrink,
estimate, build, verify, train and resume, eval, report, push and pull): what was found on
the way, each pinned by a test that failed before its fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fsc_run import in_process

from fsc.store import Store
from fsc.train.config import TrainStep


def _joined(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    """A tiny attention model trained on Shakespeare for 2 of 4 steps, then resumed: its
    training directory, its store and the two summaries."""
    root = tmp_path_factory.mktemp("study")
    out, store = root / "run", root / "store"
    common = ("--store", store)
    first = in_process("train", "tiny_attn", "--data", "shakespeare", "--seq-len", "32",
                       "--batch", "2", "--train-steps", "4", "--stop-after", "2", "--out", out,
                       *common, check=0)
    second = in_process("train", "--resume", out, *common, check=0)
    return out, store, [_joined(first.stdout), _joined(second.stdout)]


def test_a_resumed_summary_says_which_step_its_first_loss_is(trained):
    """`fsc train --resume` said 'loss 1.7760 → 3.9142': the first loss is the resumed
    invocation's first step (121 of 200), in no stored row, read as training's start."""
    first, second = trained[2]
    assert re.search(r"loss \d+\.\d{4} → \d+\.\d{4},", first), first  # from step 1: unmarked
    assert re.search(r"loss \d+\.\d{4} \(step 3\) → \d+\.\d{4},", second), second


def test_a_loss_on_the_text_trained_on_is_not_titled_held_out(trained):
    """`fsc eval CKPT --task loss --data shakespeare:train` warned 'its loss is not held out'
    and then titled its table 'held-out loss'."""
    out, store, _ = trained
    res = in_process("eval", out, "--task", "loss", "--data", "shakespeare:train",
                     "--samples", "2", "--batch", "2", "--store", store, check=0)
    assert "its loss is not held out" in _joined(res.stderr)
    said = _joined(res.stdout)
    assert "held-out loss" not in said and "tiny_attn: loss on text it was trained on" in said
    res = in_process("eval", out, "--task", "loss", "--samples", "2", "--batch", "2",
                     "--store", store, check=0)
    assert "tiny_attn: held-out loss" in _joined(res.stdout)


def _train_run(st: Store, config: dict, steps: range, seconds_per_step: float) -> str:
    run = st.start_run("train", "fsc train", None, {"recipe": "tiny_attn", "recipe_hash": "h",
                                                     "out": "/runs/a", **config})
    first = steps[0]
    st.add_rows("train_steps", run, [
        TrainStep("tiny_attn", "h", "frontier", "shakespeare", s, 3.0 - s / 100, 1e-3, 1.0,
                  64 * (s - first + 1), 1000.0, (s - first + 1) * seconds_per_step).row()
        for s in steps])
    st.finish_run(run)
    return run


def test_a_resumed_runs_report_row_counts_the_seconds_of_every_part(tmp_path):
    """The report's training row of a resumed run took its first loss and steps from the
    runs it continues, but its seconds from the last invocation alone (5.12 s for a training
    of 10.8 s); each part's elapsed_s counts from its own start."""
    store = tmp_path / "store"
    st = Store(store)
    _train_run(st, {}, range(1, 11), 1.0)  # 10 s to step 10
    resumed = _train_run(st, {"resumed_from_step": 10}, range(11, 16), 0.5)  # 2.5 s more
    res = in_process("report", resumed, "--format", "md", "--out", tmp_path / "r.md",
                     "--store", store, check=0)
    assert res.returncode == 0
    row = next(line for line in (tmp_path / "r.md").read_text().splitlines()
               if line.startswith(f"| {resumed} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[4:6] == ["15", "2.99"] and cells[-1] == "12.5", cells


@pytest.mark.parametrize("args", [("published/Qwen3-8B",),
                                  ("published/Qwen3-8B", "--out", "q.yaml"),
                                  ("published/Qwen3-8B", "--out", "recipes/", "--json")])
def test_import_refuses_a_store_it_would_not_write(fsc_main, tmp_path, args):
    """`fsc import published/NAME --store S` printed or wrote the recipe and recorded nothing,
    --store silently ignored (fsc build refuses --store without --save)."""
    res = fsc_main("import", *args, "--store", "st")
    assert res.returncode == 2, res.stdout
    assert _joined(res.stderr).startswith("error: --store: fsc import records the checkpoint")
    assert res.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == []
    doc = fsc_main("import", "published/Qwen3-8B", "--json", check=0)
    assert json.loads(doc.stdout)["recipe"] == "Qwen3-8B"
