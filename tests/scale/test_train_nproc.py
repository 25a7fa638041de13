"""`fsc train --nproc 2`: two data-parallel processes under torchrun (gloo, loopback) follow one
process with the doubled batch; rank 0 alone writes the store and the checkpoints; the run
resumes with its own process count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from fsc.store import Store

pytestmark = pytest.mark.slow  # three torchrun launches, ~30 s: make test-slow (CI runs it)

BASE = ["tiny_attn", "--data", "copy", "--seq-len", "32", "--log-every", "1", "--lr", "3e-3"]


def _fsc(*args, cwd, timeout=240):
    env = {k: v for k, v in os.environ.items() if k not in ("FSC_DEBUG",)}
    return subprocess.run([sys.executable, "-m", "fsc", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _losses(store) -> list[tuple[int, float]]:
    _, rows = Store(store).query("SELECT step, loss FROM training ORDER BY run_id, step")
    return rows


@pytest.fixture(scope="module")
def two_and_one(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    two = _fsc("train", *BASE, "--train-steps", "4", "--batch", "4", "--nproc", "2", "--out", "o2",
               "--store", "s2", "--json", cwd=root)
    assert two.returncode == 0, two.stderr[-3000:]
    one = _fsc("train", *BASE, "--train-steps", "4", "--batch", "8", "--out", "o1", "--store", "s1",
               cwd=root)
    assert one.returncode == 0, one.stderr[-3000:]
    return root, two


def test_two_processes_follow_one_with_the_doubled_batch(two_and_one):
    root, two = two_and_one
    assert "training in 2 processes" in two.stderr
    a, b = _losses(root / "s2"), _losses(root / "s1")
    assert [s for s, _ in a] == [1, 2, 3, 4] == [s for s, _ in b]  # one row per step: rank 0's
    assert [x for _, x in a] == pytest.approx([x for _, x in b], rel=1e-5)
    w2 = load_file(root / "o2" / "step-000004" / "model.safetensors")
    w1 = load_file(root / "o1" / "step-000004" / "model.safetensors")
    assert w2.keys() == w1.keys()
    for k in w1:
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-4, atol=1e-5)


def test_rank_0_alone_writes(two_and_one):
    root, two = two_and_one
    doc = json.loads(two.stdout)  # one summary, from rank 0
    assert doc["step"] == 4 and doc["checkpoint"] == "o2/step-000004"
    _, runs = Store(root / "s2").query("SELECT kind, status, config FROM runs")
    assert len(runs) == 1 and runs[0][:2] == ("train", "finished")
    assert json.loads(runs[0][2])["nproc"] == 2
    assert sorted(p.name for p in (root / "o2").iterdir()) == ["latest", "step-000004"]
    card = json.loads((root / "o2" / "step-000004" / "config.json").read_text())
    assert card["training"]["batch"] == 8  # the global batch
    assert (card["training"]["micro_batch"], card["training"]["nproc"]) == (4, 2)


def test_the_run_resumes_with_its_own_process_count(two_and_one, tmp_path):
    root, _ = two_and_one
    refused = _fsc("train", "--resume", root / "o2", "--nproc", "3", "--train-steps", "6",
                   "--store", root / "s2", cwd=root)
    assert refused.returncode == 2 and "resume it with the same" in refused.stderr
    more = _fsc("train", "--resume", root / "o2", "--train-steps", "6", "--store", root / "s2",
                cwd=root)
    assert more.returncode == 0, more.stderr[-3000:]
    assert "training in 2 processes" in more.stderr
    assert [s for s, _ in _losses(root / "s2")] == [1, 2, 3, 4, 5, 6]
    assert (root / "o2" / "latest").read_text().strip() == "step-000006"


def _stopped(tmp_path, signum) -> tuple[int, str]:
    """A long `fsc train --nproc 2` sent `signum` (to the launching fsc alone) once two steps
    are logged: (its exit status, its stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "FSC_DEBUG"}
    proc = subprocess.Popen([sys.executable, "-m", "fsc", "train", *BASE, "--train-steps", "100000",
                             "--batch", "2", "--nproc", "2", "--out", "o", "--store", "s"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while proc.poll() is None and time.time() < deadline:
        time.sleep(0.5)
        try:
            if Store(tmp_path / "s").query("SELECT count(*) FROM train_steps")[1][0][0] >= 2:
                break
        except Exception:  # noqa: BLE001 - not created yet, or the writer holds it
            continue
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=90)
    return proc.returncode, err


def test_ctrl_c_of_an_nproc_run_ends_without_torchruns_traceback(tmp_path):
    """A terminal's Ctrl-C reaches the launching fsc (torchrun runs in a session of its own):
    the ranks stop after the same step and say so; torchrun's own traceback of the signal is
    not shown (fsc.train.torchrun)."""
    code, err = _stopped(tmp_path, signal.SIGINT)
    assert code == 130, err[-3000:]
    said = " ".join(err.split())
    assert "by SIGINT; continue with" in said and "fsc train --resume" in said
    assert "Traceback" not in err and "SignalException" not in err


def test_sigterm_to_the_launcher_stops_every_rank_saved(tmp_path):
    """What `timeout` or Kubernetes does: SIGTERM to the launching fsc alone. It passes the
    signal on (torchrun to each rank); every rank ends after the same step, rank 0 saves and
    marks the run interrupted, and the launcher exits 143."""
    code, err = _stopped(tmp_path, signal.SIGTERM)
    assert code == 143, err[-3000:]
    assert "by SIGTERM; continue with" in err and "fsc train --resume" in err
    step = json.loads((tmp_path / "o" / (tmp_path / "o" / "latest").read_text().strip()
                       / "training_state.json").read_text())["step"]
    _, [(status, error)] = Store(tmp_path / "s").query("SELECT status, error FROM runs")
    assert status == "interrupted" and error == f"interrupted at step {step} by SIGTERM"
