"""`fsc train`: a tiny model learns copy, resuming is bit-exact, Ctrl-C (and SIGTERM, SIGUSR2)
leaves a loadable checkpoint, a run killed outright resumes from its last save, the store holds
the run and its steps, the card says what was trained, a run missing its options is refused
before torch loads."""

import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from fsc.checkpoint.io import load_checkpoint, verify_checkpoint
from fsc.data.tasks import Copy
from fsc.eval.grid import EvalSettings
from fsc.eval.retrieval import _cell
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.seeds import derive
from fsc.store import Store
from fsc.tokenizer import ByteTokenizer
from fsc.train.loop import TrainConfig, Trainer, lr_at

COPY = ["--data", "copy", "--seq-len", "32", "--batch", "32"]


def _weights(step_dir):
    return load_file(step_dir / "model.safetensors")


def _copy_accuracy(model, n=64):
    task = Copy(ByteTokenizer(), 32, model.recipe.block_size)
    samples = [task.sample(derive(99, i)) for i in range(n)]
    settings = EvalSettings("diffusion", model.recipe.block_size, n, n, 0, 32)
    return _cell(model, ByteTokenizer(), samples, settings, "cpu")["accuracy"]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_tiny_model_learns_copy(tmp_path):
    """Exact match of the whole copied string, decoded by the cached decoder, on held-out
    samples: ≥ 90 % after 200 steps (about 8 s here); the untrained model scores 0."""
    recipe = load_recipe("tiny_attn")
    model = build_model(recipe, seed=0)
    assert _copy_accuracy(model) == 0.0
    cfg = TrainConfig(source="tiny_attn", data="copy", seq_len=32, steps=200, out=str(tmp_path),
                      batch=32, warmup=20, log_every=50)
    res = Trainer(cfg, recipe, model, ByteTokenizer()).run()
    assert res.losses[-1] < res.losses[0] / 10
    assert _copy_accuracy(model.eval()) >= 0.9


def test_schedule_warms_up_then_decays_to_the_floor():
    cfg = TrainConfig(source="x", data="copy", seq_len=32, steps=100, out="o", lr=1.0, warmup=10)
    lrs = [lr_at(cfg, s) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in itertools.pairwise(lrs[10:]))
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)


def test_resume_is_bit_identical(fsc_main, tmp_path):
    store = ["--store", tmp_path / "store"]
    fsc_main("train", "tiny_hybrid", *COPY, "--train-steps", "6", "--out", tmp_path / "whole",
             "--batch", "4", *store, check=0)
    half = fsc_main("train", "tiny_hybrid", *COPY, "--train-steps", "6",
                    "--out", "split", "--batch", "4", "--stop-after", "3", *store,
                    check=0)  # (fsc_main runs in tmp_path)
    assert "stopped at step 3 of 6; continue with" in half.stderr
    assert "; checkpoint split/step-000003; run " in half.stdout
    assert json.loads((tmp_path / "split" / "step-000003" / "training_state.json")
                      .read_text())["step"] == 3
    rest = fsc_main("train", "--resume", "split", *store, check=0)
    assert "; checkpoint split/step-000006; run " in rest.stdout  # as the first run named it
    assert (tmp_path / "split" / "latest").read_text().strip() == "step-000006"
    a, b = _weights(tmp_path / "whole" / "step-000006"), _weights(tmp_path / "split" / "step-000006")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    sa = load_file(tmp_path / "whole" / "step-000006" / "training_state.safetensors")
    sb = load_file(tmp_path / "split" / "step-000006" / "training_state.safetensors")
    assert all(torch.equal(sa[k], sb[k]) for k in sa if k.startswith("exp_avg"))
    start = _weights(tmp_path / "split" / "step-000003")
    assert not all(torch.equal(start[k], b[k]) for k in b)  # the resumed steps trained


def test_the_old_spelling_of_train_steps_trains_the_same(cli, tmp_path):
    """fsc train's optimizer steps were --steps, which is K in the other commands: the old
    spelling still works, after one line on stderr, and gives the same weights."""
    runs = {}
    for opt in ("--train-steps", "--steps"):
        out = tmp_path / opt.strip("-")
        r = cli("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2", opt,
                "2", "--out", out, "--store", tmp_path / "store", "--json")
        assert r.code == 0, r.err
        notices = [line for line in r.err.splitlines() if "deprecated" in line]
        runs[opt] = json.loads(r.out), notices, _weights(out / "step-000002")
    (new, new_notices, a), (old, old_notices, b) = runs.values()
    assert new_notices == [] and old_notices == ["fsc train: --steps is deprecated, use "
                                                 "--train-steps"]
    assert (old["step"], old["steps"]) == (new["step"], new["steps"]) == (2, 2)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    both = cli("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--steps", "2",
               "--train-steps", "2", "--out", tmp_path / "both")
    assert both.code == 2
    assert both.err.strip() == "error: --steps is the old spelling of --train-steps; give " \
                               "--train-steps only"


@pytest.mark.slow  # a training, 1.3 s (tests/core/test_progress.py renders the bar at once)
def test_the_bar_keeps_its_count_whole_on_an_80_column_terminal(fsc_main, tmp_path,
                                                                 monkeypatch):
    """A run of 100000 steps on an 80-column terminal showed `213/10…`, read as 213 of about
    10: the count and the times stay whole (fsc.cli.progress)."""
    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr("fsc.cli.train_render.err",
                        Console(file=screen, width=80, force_terminal=True))
    fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "16", "--batch", "2",
             "--train-steps", "100000", "--stop-after", "2", "--out", "run",
             "--store", tmp_path / "store", check=0)
    last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen.getvalue()).rstrip().splitlines()[-1]
    assert re.fullmatch(r"train tiny_attn: loss [0-9.]+, [0-9.]+k tok/s ━+ +2/100000 "
                        r"0:00:\d\d (\d+:\d\d:\d\d|-:--:--)", last), last


def test_resume_refuses_new_settings_and_a_plain_checkpoint(fsc_main, tmp_path):
    fsc_main("build", "tiny_attn", "--save", tmp_path / "plain", "--store", tmp_path / "s", check=0)
    res = fsc_main("train", "--resume", tmp_path / "plain")
    assert res.returncode == 2 and "no training state" in res.stderr
    res = fsc_main("train", "--resume", tmp_path / "plain", "--lr", "0.1", "--batch", "2")
    assert res.returncode == 2 and "drop --batch, --lr" in res.stderr


def test_missing_options_are_refused_before_torch_is_imported():
    """A run without its required options is a one-line error, said before torch (seconds of
    imports) is loaded."""
    missing = {("tiny_attn",): "--data, --seq-len, --train-steps, --out",
               (): "RECIPE, --data, --seq-len, --train-steps, --out",
               ("tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "3"): "--out"}
    code = f"""
import sys
from fsc.cli.main import main
for args in {list(missing)!r}:
    assert main(["train", *args]) == 2, args
assert "torch" not in sys.modules, "a missing option imported torch"
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [f"error: fsc train needs {words} (or --resume DIR)"
                                        for words in missing.values()]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_store_card_and_checkpoint_of_a_run(fsc_main, tmp_path):
    store = tmp_path / "store"
    res = fsc_main("train", "tiny_attn", *COPY, "--train-steps", "20", "--log-every", "5",
                   "--eval-every", "10", "--save-every", "10", "--out", tmp_path / "run",
                   "--store", store, "--json", check=0)
    summary = json.loads(res.stdout)
    assert summary["step"] == 20 and summary["final_loss"] < summary["first_loss"]
    ckpt = tmp_path / "run" / "step-000020"
    assert summary["checkpoint"] == str(ckpt.resolve())
    assert (tmp_path / "run" / "step-000010").is_dir()
    verify_checkpoint(ckpt)  # the training state is beside the checksummed files
    listed = (ckpt / "checksums.sha256").read_text()
    assert "training_state" not in listed
    card = (ckpt / "README.md").read_text()
    assert "trained by `fsc train` for 20 steps on `copy` (objective `frontier`" in card
    assert "not trained" not in card
    config = json.loads((ckpt / "config.json").read_text())
    assert config["training"]["steps"] == 20 and config["seed"] is None
    st = Store(store)
    _, rows = st.query("select step, loss, lr, grad_norm, tokens_per_s, eval_accuracy, recipe,"
                       " objective, run_status from training order by step")
    assert [r[0] for r in rows] == [1, 5, 10, 15, 20]  # the first step, then every 5th
    assert [r[5] is not None for r in rows] == [False, False, True, False, True]
    assert all(r[6] == "tiny_attn" and r[7] == "frontier" and r[8] == "finished" for r in rows)
    _, [(kind, status)] = st.query("select kind, status from runs")
    assert (kind, status) == ("train", "finished")
    _, model = load_checkpoint(ckpt)
    assert model.recipe.name == "tiny_attn"


def test_ar_objective_trains_the_recipe_at_G_1(fsc_main, tmp_path):
    fsc_main("train", "tiny_attn", *COPY, "--train-steps", "2", "--objective", "ar",
             "--out", tmp_path / "ar", "--store", tmp_path / "s", check=0)
    recipe, _ = load_checkpoint(tmp_path / "ar" / "step-000002")
    assert recipe.block_size == 1


def test_training_a_text_file(fsc_main, tmp_path):
    (tmp_path / "t.txt").write_text("the quick brown fox jumps over the lazy dog. " * 20)
    res = fsc_main("train", "tiny_mamba", "--data", tmp_path / "t.txt", "--seq-len", "64",
                   "--train-steps", "3", "--batch", "2", "--out", tmp_path / "o",
                   "--store", tmp_path / "s", check=0)
    assert "trained tiny_mamba to step 3 of 3 on" in res.stdout


def _training(tmp_path, *args, steps=2, log_every=1):
    """`fsc train` in a process of its own, once the store has `steps` step rows."""
    env = {**os.environ, "FSC_STORE": str(tmp_path / "store")}
    proc = subprocess.Popen([sys.executable, "-m", "fsc", "train", *map(str, args),
                             "--log-every", str(log_every)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until it trains (the store has step rows)
        time.sleep(0.5)
        if proc.poll() is not None:
            break
        try:
            _, [(n,)] = Store(tmp_path / "store").query("select count(*) from train_steps")
        except Exception:  # noqa: BLE001 - not created yet, or the writer holds it
            continue
        if n >= steps:
            break
    return proc


@pytest.mark.parametrize("stop, code", [
    pytest.param(signal.SIGINT, 130, id="SIGINT"),
    pytest.param(signal.SIGTERM, 143, id="SIGTERM", marks=pytest.mark.slow),  # timeout, k8s, Slurm
    pytest.param(signal.SIGUSR2, 140, id="SIGUSR2", marks=pytest.mark.slow),  # Slurm's warning
])
@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_ctrl_c_leaves_a_loadable_checkpoint(tmp_path, stop, code):
    out = tmp_path / "run"
    proc = _training(tmp_path, "tiny_attn", *COPY, "--train-steps", "100000", "--out", out)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "interrupted at step" in err and "fsc train --resume" in err
    assert f"by {signal.Signals(stop).name}" in err and "Traceback" not in err
    ckpt = (out / (out / "latest").read_text().strip())
    recipe, _ = load_checkpoint(ckpt)  # verified: checksums, headers, then the tensors
    assert recipe.name == "tiny_attn"
    state = json.loads((ckpt / "training_state.json").read_text())
    assert state["step"] >= 2
    _, [(status,)] = Store(tmp_path / "store").query("select status from runs")
    assert status == "interrupted"


def test_a_stop_signal_while_training_sets_up_is_not_lost(tmp_path, monkeypatch, capsys):
    """A SIGTERM that comes after the command's handlers are in place but before the loop
    begins (the model built, the data read) stops the run at its first step boundary, saved
    and resumable, as one during the loop does: not trained to the end and exit 0."""
    from fsc.cli.main import main
    from fsc.train.loop import Trainer

    real = Trainer.run

    def run(self, *args, **kwargs):  # the model built, the data read, the store's run open
        os.kill(os.getpid(), signal.SIGTERM)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "run", run)
    out, store = tmp_path / "run", ["--store", str(tmp_path / "store")]
    code = main(["train", "tiny_attn", *COPY, "--batch", "4", "--train-steps", "40",
                 "--out", str(out), *store])
    err = capsys.readouterr().err
    assert code == 143, err
    assert "interrupted at step 0 by SIGTERM" in err and "fsc train --resume" in err
    _, [(status,)] = Store(tmp_path / "store").query("select status from runs")
    assert status == "interrupted"
    monkeypatch.setattr(Trainer, "run", real)
    assert main(["train", "--resume", str(out), *store]) == 0
    assert main(["train", "tiny_attn", *COPY, "--batch", "4", "--train-steps", "40",
                 "--out", str(tmp_path / "whole"), *store]) == 0
    resumed, whole = _weights(out / "step-000040"), _weights(tmp_path / "whole" / "step-000040")
    assert resumed.keys() == whole.keys()
    assert all(torch.equal(resumed[k], whole[k]) for k in whole)  # bit-exact


def test_a_run_stopped_before_its_first_step_is_not_called_trained(tmp_path, monkeypatch,
                                                                   capsys):
    """Ctrl-C before the first step said "trained tiny_attn to step 0 of 40 ...; checkpoint
    run/step-000000", and fsc eval scored that step's seeded weights as the run's without a
    word. The step stays, for --resume, but nothing calls it trained."""
    from fsc.cli.main import main

    real = Trainer.run

    def run(self, *args, **kwargs):  # the run set up; Ctrl-C before its first step
        os.kill(os.getpid(), signal.SIGINT)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "run", run)
    out, store = tmp_path / "run", ["--store", str(tmp_path / "store")]
    setting = ["tiny_attn", *COPY, "--batch", "4", "--train-steps", "40", *store]
    assert main(["train", *setting, "--out", str(out)]) == 130
    said = capsys.readouterr()
    assert "trained" not in said.out.replace("nothing trained", "")
    assert said.out.startswith("tiny_attn on copy (frontier): interrupted before its first "
                               f"step, nothing trained; the weights it started from are kept "
                               f"in {out / 'step-000000'} for --resume; run ")
    assert "interrupted at step 0 by SIGINT; continue with" in said.err
    assert main(["train", *setting, "--out", str(tmp_path / "j"), "--json"]) == 130
    doc = json.loads(capsys.readouterr().out)
    assert (doc["trained"], doc["step"], doc["interrupted"]) == (False, 0, True)
    config = json.loads((out / "step-000000" / "config.json").read_text())
    assert config["seed"] == 0 and config["training"]["steps"] == 0  # seeded: untrained
    assert main(["eval", str(out), "--task", "loss", "--data", "copy", "--samples", "4",
                 *store]) == 0
    assert (f"warning: {out / 'step-000000'} holds no trained step (its run was interrupted "
            "before its first step and saved it for --resume): it scores the weights the run "
            "started from, seeded random ones") in " ".join(capsys.readouterr().err.split())


def test_the_summary_is_one_line_however_long_its_paths(tmp_path, capsys):
    """`fsc train ... | tee log`: the summary stays one line (run id and checkpoint path in it)
    past the console's width, for a reader that parses it."""
    from fsc.cli.main import main

    out = tmp_path / ("a-rather-long-folder-name-" * 6) / "run"
    assert main(["train", "tiny_attn", *COPY, "--batch", "4", "--train-steps", "2",
                 "--out", str(out), "--store", str(tmp_path / "store")]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith("trained ")]
    assert len(line) > 200 and f"checkpoint {out / 'step-000002'}; run 2" in line


# `fsc train` with its report preceded by a SIGTERM to itself: a signal that comes once the
# loop is done, while the last checkpoint is recorded (a scheduler repeating its SIGTERM)
SIGNALLED_REPORT = """
import os, signal, sys
import fsc.cli.train as cli
real = cli.report
def report(*args, **kw):
    os.kill(os.getpid(), signal.SIGTERM)
    real(*args, **kw)
cli.report = report
from fsc.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # a training process of its own: make test-slow
def test_a_stop_signal_after_the_loop_does_not_cut_the_end_short(tmp_path):
    """A SIGTERM while the command records its last checkpoint and says how the run ended is
    absorbed: the command ends as it would have, the checkpoint recorded in the store."""
    env = {**os.environ, "FSC_STORE": str(tmp_path / "store")}
    res = subprocess.run([sys.executable, "-c", SIGNALLED_REPORT, "train", "tiny_attn", *COPY,
                          "--batch", "4", "--train-steps", "2", "--out", str(tmp_path / "run")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    _, paths = Store(tmp_path / "store").query("select path from artifacts")
    assert str(tmp_path / "run" / "step-000002") in [p for (p,) in paths]


@pytest.mark.slow  # two training processes, one killed outright: make test-slow
def test_a_run_killed_outright_resumes_from_its_last_save_bit_exact(fsc_main, tmp_path):
    """kill -9 leaves the rolling saves (here every 0.01 minutes); `--resume` goes on from
    the newest, and three steps later holds the weights of a run never stopped."""
    setting = ["tiny_hybrid", *COPY, "--batch", "4", "--train-steps", "100000"]
    killed = tmp_path / "killed"
    proc = _training(tmp_path, *setting, "--out", killed, "--save-minutes", "0.01", steps=4)
    deadline = time.time() + 60
    while proc.poll() is None and not (killed / "latest").exists() and time.time() < deadline:
        time.sleep(0.1)
    proc.kill()
    proc.wait(timeout=30)
    _, [(status,)] = Store(tmp_path / "store").query("select status from runs")
    assert status == "running"  # what `fsc runs` shows as dead
    saved = json.loads((killed / (killed / "latest").read_text().strip()
                        / "training_state.json").read_text())["step"]
    assert saved >= 1 and len(list(killed.glob("step-*"))) <= 3  # --keep's default
    store = ["--store", tmp_path / "store"]
    fsc_main("train", "--resume", killed, "--stop-after", "3", *store, check=0)
    fsc_main("train", *setting, "--out", tmp_path / "whole", "--stop-after", saved + 3, *store,
             check=0)
    name = f"step-{saved + 3:06d}"
    a, b = _weights(tmp_path / "whole" / name), _weights(killed / name)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_training_directory_starts_a_new_run_from_its_newest_checkpoint(fsc_main, tmp_path):
    """`fsc train RUN_DIR ...` (post-training): the new run starts from the weights `latest`
    names and records that step directory as its source."""
    store = ["--store", tmp_path / "store"]
    fsc_main("train", "tiny_attn", *COPY, "--batch", "2", "--train-steps", "2",
             "--out", tmp_path / "first", *store, check=0)
    fsc_main("train", tmp_path / "first", *COPY, "--batch", "2", "--train-steps", "1",
             "--lr", "1e-9", "--out", tmp_path / "then", *store, check=0)
    state = json.loads((tmp_path / "then" / "step-000001" / "training_state.json").read_text())
    assert state["config"]["source"] == str(tmp_path / "first" / "step-000002")
    a, b = _weights(tmp_path / "first" / "step-000002"), _weights(tmp_path / "then" / "step-000001")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)  # a step of lr 1e-9 from them


@pytest.mark.slow  # a training process of its own: make test-slow
def test_a_run_stopped_between_logged_steps_stores_the_step_it_ended_at(tmp_path):
    """From the command line: Ctrl-C between --log-every steps; the store held the steps
    logged before it, so `fsc runs` said the run got to an earlier step than its checkpoint."""
    out = tmp_path / "run"
    proc = _training(tmp_path, "tiny_attn", *COPY, "--train-steps", "100000", "--out", out,
                     steps=1, log_every=1000)
    time.sleep(1.0)  # past step 1, which is always logged
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    ckpt = out / (out / "latest").read_text().strip()
    step = json.loads((ckpt / "training_state.json").read_text())["step"]
    _, rows = Store(tmp_path / "store").query("select step from train_steps order by step")
    assert step > 1 and [r[0] for r in rows] == [1, step]
    res = subprocess.run([sys.executable, "-m", "fsc", "runs", "--store", tmp_path / "store",
                          "--json"], capture_output=True, text=True, timeout=60)
    assert json.loads(res.stdout)[0]["last_step"] == step


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_second_ctrl_c_says_what_it_kept(tmp_path, monkeypatch, capsys):
    """A second Ctrl-C ends training at once, in the save under way: the command said only
    "interrupted: fsc train stopped before it finished", not that the step was not saved, nor
    which checkpoint is the last and how to go on from it."""
    from fsc.cli.main import main
    from fsc.train.loop import Trainer

    real, saves = Trainer.save, []

    def save(self, *args, **kwargs):
        saves.append(self.step)
        if len(saves) == 2:  # the second save: Ctrl-C twice, the second at once
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "save", save)
    out, store = tmp_path / "run", ["--store", str(tmp_path / "store")]
    code = main(["train", "tiny_attn", *COPY, "--batch", "2", "--train-steps", "6",
                 "--save-every", "2", "--out", str(out), *store])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 130, err
    assert ("interrupted again (SIGINT): training stopped at once, the step under way not "
            f"saved; the last checkpoint is {out}/step-000002; continue with: fsc train "
            f"--resume {out} --store {tmp_path / 'store'}") in err
    assert (out / "latest").read_text().strip() == "step-000002"
