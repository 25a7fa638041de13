"""`fsc train`'s options as a researcher combines them: an option the run cannot use is one
line, exit 2, before anything is written or launched (not ignored, not a failure later), and a
run of several processes with state passing resumes bit-exact."""

import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

COPY = ["tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "2", "--batch", "2"]
PASSKEY = ["tiny_attn", "--data", "passkey", "--seq-len", "128", "--train-steps", "2",
           "--batch", "2"]


@pytest.mark.parametrize("args, line", [
    ([*PASSKEY, "--pairs", "4"], "error: --pairs: for --data mqar or a mix holding one "
                                 "(this is passkey)"),
    ([*COPY, "--needle-digits", "8"], "error: --needle-digits: for --data passkey, "
                                      "niah_multikey, niah_multivalue, niah_multiquery, ruler "
                                      "or a mix holding one (this is copy)"),
    (["tiny_attn", "--data", "cwe", "--seq-len", "128", "--train-steps", "2",
      "--supervise-needle"], "error: --supervise-needle: for --data passkey, niah_multikey, "
                             "niah_multivalue, niah_multiquery, vt, ruler or a mix holding one "
                             "(this is cwe)"),
    ([*PASSKEY, "--text-field", "body"], "error: --text-field: for --data FILE.jsonl, "
                                         "FILE.parquet or hf:NAME"),
    (["tiny_attn", "--data", "TEXT", "--seq-len", "32", "--train-steps", "2",
      "--eval-every", "1"], "error: --eval-every 1: the in-loop eval decodes held-out samples "
                           "of a task"),
    (["tiny_attn", "--data", "copy", "--seq-len", "32,64:0", "--train-steps", "2"],
     "the longest length, 64, is the run's training length"),
    ([*COPY, "--objective", "ar", "--weighting", "masked"],
     "error: --weighting masked: an autoregressive run trains the next-token loss"),
    (["quality_scorer", "--data", "copy", "--seq-len", "32", "--train-steps", "2",
      "--weighting", "elbo"], "error: --weighting elbo: an autoregressive run"),
])
def test_an_option_the_run_would_not_use_is_refused_before_training(cli, tmp_path, args, line):
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    args = [str(text) if a == "TEXT" else a for a in args]
    r = cli("train", *args, "--out", tmp_path / "run", "--store", tmp_path / "store")
    assert r.code == 2, r.err
    assert line in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not (tmp_path / "run").exists()


def test_the_same_options_where_the_data_reads_them_train(cli, tmp_path):
    r = cli("train", "tiny_attn", "--data", "passkey:1,mqar:1", "--seq-len", "128",
            "--train-steps", "1", "--batch", "1", "--pairs", "2", "--needle-digits", "4",
            "--supervise-needle", "--out", tmp_path / "run", "--store", tmp_path / "store")
    assert r.code == 0, r.err


def test_an_autoregressive_run_records_no_loss_weighting(cli, tmp_path):
    """--weighting is refused for an AR run, and its record holds none (not the denoisers'
    default): a query grouping runs by weighting leaves AR runs apart."""
    from fsc.store import Store

    r = cli("train", *COPY, "--objective", "ar", "--out", tmp_path / "run",
            "--store", tmp_path / "store")
    assert r.code == 0, r.err
    _, [(weighting,)] = Store(tmp_path / "store").query("select config->>'weighting' from runs")
    assert weighting is None
    latest = (tmp_path / "run" / (tmp_path / "run" / "latest").read_text().strip())
    assert json.loads((latest / "training_state.json").read_text())["config"]["weighting"] is None


def test_a_device_setting_is_refused_before_processes_are_launched(cli, tmp_path):
    r = cli("train", *COPY, "--nproc", "2", "--dtype", "bf16", "--out", tmp_path / "run",
            "--store", tmp_path / "store")
    assert r.code == 2, r.err
    assert r.err.strip() == "error: --dtype bf16 autocasts on CUDA; the CPU trains in fp32"
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # three torchrun launches of two processes, ~60 s
def test_state_passing_over_two_processes_resumes_bit_exact(tmp_path):
    """Each process carries the states of its own rows: a save keeps every process's, so a
    resumed run starts each process from its rows, as the run never stopped does."""
    env = {k: v for k, v in os.environ.items() if k != "FSC_DEBUG"}
    run = ["tiny_mamba", "--data", "copy", "--seq-len", "32", "--train-steps", "4", "--batch",
           "2", "--nproc", "2", "--objective", "blocks", "--state-passing", "--store", "store"]

    def fsc(*args):
        res = subprocess.run([sys.executable, "-m", "fsc", *map(str, args)], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=240)
        assert res.returncode == 0, res.stderr[-3000:]

    fsc("train", *run, "--out", "whole")
    fsc("train", *run, "--out", "split", "--stop-after", "2")
    saved = load_file(tmp_path / "split" / "step-000002" / "training_state.safetensors")
    assert {t.shape[0] for k, t in saved.items() if k.startswith("carry.")} == {4}  # 2 × 2 rows
    fsc("train", "--resume", "split", "--store", "store")
    a = load_file(tmp_path / "whole" / "step-000004" / "model.safetensors")
    b = load_file(tmp_path / "split" / "step-000004" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    losses = [json.loads((tmp_path / d / "step-000004" / "training_state.json").read_text())
              ["losses"] for d in ("whole", "split")]
    assert losses[0] == losses[1]
