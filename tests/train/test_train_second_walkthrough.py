"""`fsc train`, checked by hand: a mix's key length is recorded for `fsc eval`; a resumed run
may not end its schedule inside its warmup; a training directory without `latest` names its
newest step; a run --stop-at ended resumes as a no-op; a moved adaptation resumes with the
tokenizer it carries; the curve stored is the one asked."""

import json
import math

import pytest

from fsc.store import Store

COPY = ["tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2"]


def _one_line(res, says: str) -> None:
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.splitlines()) == 1 and says in " ".join(res.stderr.split()), res.stderr
    assert res.stdout == ""


def test_a_mix_records_the_key_length_it_trained_with(fsc_main, tmp_path):
    """--needle-digits 8 on passkey,vt: config.json says 8, so fsc eval asks 8-digit keys."""
    fsc_main("train", "tiny_attn", "--data", "passkey,vt", "--needle-digits", "8", "--hops", "2",
             "--seq-len", "160", "--batch", "1", "--train-steps", "1", "--out", "run",
             "--store", tmp_path / "st", check=0)
    training = json.loads((tmp_path / "run" / "step-000001" / "config.json").read_text())[
        "training"]
    assert training["needle_digits"] == 8


def test_a_resume_may_not_end_the_schedule_inside_its_warmup(fsc_main, tmp_path):
    fsc_main("train", *COPY, "--train-steps", "20", "--warmup", "10", "--stop-after", "2",
             "--out", "run", "--store", tmp_path / "st", check=0)
    res = fsc_main("train", "--resume", "run", "--train-steps", "5", "--store", tmp_path / "st")
    _one_line(res, "--train-steps 5 is shorter than the run's warmup (10 steps)")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["latest", "step-000002"]
    fsc_main("train", "--resume", "run", "--train-steps", "10", "--stop-after", "1",
             "--store", tmp_path / "st", check=0)


def test_a_training_directory_without_latest_names_its_newest_step(fsc_main, tmp_path):
    fsc_main("train", *COPY, "--train-steps", "6", "--stop-after", "2", "--save-every", "1",
             "--out", "run", "--store", tmp_path / "st", check=0)
    (tmp_path / "run" / "latest").unlink()
    res = fsc_main("train", "--resume", "run", "--store", tmp_path / "st")
    _one_line(res, "--resume run: no `latest` file naming its newest step; resume that step "
              "itself (--resume run/step-000002)")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_run_that_stop_at_ended_resumes_as_a_no_op(fsc_main, tmp_path, monkeypatch):
    """A requeued job's `fsc train --resume DIR` of a run --stop-at ended trains nothing, also
    with the targets it had; a new --stop-at goes on. The eval is scripted: exact match 0.95
    from step 4 on."""
    import fsc.eval.retrieval as ev

    monkeypatch.setattr(ev, "quick_eval", lambda t: {"eval_accuracy": 0.95 * (t.step >= 4)})
    st = ["--store", tmp_path / "st"]
    for save_every in ("0", "2"):  # the end saved alone, or by --save-every at the same step
        out = f"run{save_every}"
        fsc_main("train", *COPY, "--train-steps", "20", "--eval-every", "2", "--stop-at", "0.9",
                 "--save-every", save_every, "--out", out, *st, check=0)
        for again in ([], ["--stop-at", "0.9", "--train-steps", "20"]):  # the same targets
            res = fsc_main("train", "--resume", out, *again, *st, "--json", check=0)
            assert json.loads(res.stdout)["step"] == 4 and "nothing to do" in res.stderr
        assert (tmp_path / out / "latest").read_text().strip() == "step-000004"
    doc = json.loads(fsc_main("train", "--resume", "run0", "--stop-at", "1", "--stop-after",
                              "2", *st, "--json", check=0).stdout)
    assert doc["step"] == 6 and not doc["reached"]
    _, rows = Store(tmp_path / "st").query("select count(*) from runs")
    assert rows == [(3,)]


def test_the_stored_curve_holds_the_steps_rates_and_tokens_asked(fsc_main, tmp_path):
    """10 steps, warmup 4, lr 1e-2, --log-every 3, next-token on 2 micro-batches of 2 x 32
    tokens: rows at steps 1, 3, 6, 9 and 10, each with the rate its step trained at (linear
    warmup, then cosine to lr/10) and 128 tokens a step, computed here by hand."""
    fsc_main("train", *COPY, "--objective", "ar", "--accum", "2", "--train-steps", "10",
             "--warmup", "4", "--lr", "1e-2", "--log-every", "3", "--out", "run",
             "--store", tmp_path / "st", check=0)
    _, rows = Store(tmp_path / "st").query("select step, lr, tokens from train_steps order by step")
    peak, floor = 1e-2, 1e-3
    by_hand = {1: peak / 4, 3: peak * 3 / 4}
    for step in (6, 9, 10):  # the cosine over the 6 steps after the warmup
        by_hand[step] = floor + (peak - floor) * 0.5 * (1 + math.cos(math.pi * (step - 5) / 6))
    assert [r[0] for r in rows] == [1, 3, 6, 9, 10]
    for step, lr, tokens in rows:
        assert lr == pytest.approx(by_hand[step], rel=1e-12) and tokens == 128 * step


def _tokenizer_without_mask(folder) -> None:
    """A character tokenizer of 199 tokens and no mask token (a published causal LM's kind)."""
    from tokenizers import Tokenizer, decoders, models

    folder.mkdir()
    vocab = {chr(i + 32): i for i in range(198)} | {"[UNK]": 198}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.decoder = decoders.Fuse()
    tok.save(str(folder / "tokenizer.json"))


@pytest.mark.slow  # three runs: about 3 s
def test_a_moved_adaptation_resumes_with_the_tokenizer_it_carries(fsc_main, tmp_path):
    """An adaptation adds a mask token and writes its tokenizer into the training directory;
    the directory moved, the run resumes (from the tokenizer/ beside its steps)."""
    _tokenizer_without_mask(tmp_path / "tok")
    text = ["--data", "shakespeare", "--seq-len", "16", "--batch", "1"]
    st = ["--store", tmp_path / "st"]
    fsc_main("train", "tiny_attn", *text, "--objective", "ar", "--tokenizer", "tok",
             "--train-steps", "1", "--out", "ar", *st, check=0)
    fsc_main("train", "ar", "--G", "4", *text, "--train-steps", "2", "--stop-after", "1",
             "--out", "adapted", *st, check=0)
    (tmp_path / "adapted").rename(tmp_path / "moved")
    doc = json.loads(fsc_main("train", "--resume", "moved", *st, "--json", check=0).stdout)
    assert doc["step"] == 2
    training = json.loads((tmp_path / "moved" / "step-000002" / "config.json").read_text())[
        "training"]
    assert training["tokenizer"] == str(tmp_path / "moved" / "tokenizer")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_resume_after_a_kill_closes_the_dead_run_and_records_its_saves(fsc_main, tmp_path):
    """A kill -9 leaves its run marked running and its saves unrecorded: the resume closes
    that run (interrupted, not dead for good) and records every step checkpoint on disk."""
    import subprocess
    import sys


    args = ("--data", "copy", "--seq-len", "32", "--batch", "2", "--store", tmp_path / "st")
    fsc_main("train", "tiny_attn", *args, "--train-steps", "4", "--save-every", "2",
             "--stop-after", "2", "--out", tmp_path / "run", check=0)
    st = Store(tmp_path / "st")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    [(killed,)] = st.query("SELECT run_id FROM runs")[1]
    st.query(f"UPDATE runs SET status = 'running', ended_at = NULL, pid = {gone.pid} "
             f"WHERE run_id = '{killed}'", write=True)  # as a kill -9 leaves it
    st.query("DELETE FROM artifacts", write=True)
    fsc_main("train", "--resume", tmp_path / "run", "--store", tmp_path / "st", check=0)
    runs = dict(st.query("SELECT run_id, status FROM runs")[1])
    assert runs.pop(killed) == "interrupted" and list(runs.values()) == ["finished"]
    saved = sorted(a["path"].rsplit("/", 1)[-1] for a in st.artifacts())
    assert saved == ["step-000002", "step-000004"]


@pytest.mark.parametrize(("objective", "masks"), [("frontier", True), ("blocks", True),
                                                  ("ar", False)])
def test_the_memory_check_counts_the_masks_of_the_objective_trained(fsc_main, tmp_path,
                                                                    monkeypatch, objective,
                                                                    masks):
    """An AR step reads no mask (the causal kernel): its refusal names none, where the
    block-diffusion objectives' name theirs (the check counted a T x T mask a layer for all)."""
    monkeypatch.setattr("fsc.train.fits.host_free_bytes", lambda: 1)
    res = fsc_main("train", "tiny_attn", "--objective", objective, "--data", "copy",
                   "--seq-len", "32", "--batch", "2", "--train-steps", "1", "--out",
                   tmp_path / "run", "--store", tmp_path / "st", check=2)
    said = " ".join(res.stderr.split())
    assert "not enough memory to train tiny_attn" in said
    assert ("attention masks" in said) == masks
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # two trainings: seconds (make test-slow)
def test_a_run_from_a_checkpoint_says_what_it_started_from(fsc_main, tmp_path):
    """The card and config.json of a run that started from a checkpoint's weights name that
    checkpoint and its own training (they read as if trained from scratch)."""
    args = ("--data", "copy", "--seq-len", "32", "--batch", "2", "--train-steps", "2",
            "--store", tmp_path / "st")
    fsc_main("train", "tiny_attn", *args, "--out", tmp_path / "first", check=0)
    fsc_main("train", tmp_path / "first", *args, "--out", tmp_path / "then", check=0)
    step = tmp_path / "then" / "step-000002"
    was = json.loads((step / "config.json").read_text())["training"]["started_from"]
    assert was["checkpoint"] == str((tmp_path / "first" / "step-000002").resolve())
    assert (was["steps"], was["data"]) == (2, "copy")
    card = " ".join((step / "README.md").read_text().split())
    assert (f"It started from the weights of checkpoint `{was['checkpoint']}` (recipe "
            f"{was['recipe_hash']}, itself trained 2 steps on `copy`).") in card
    first = json.loads((tmp_path / "first" / "step-000002" / "config.json").read_text())
    assert "started_from" not in first["training"]


def test_a_store_that_is_a_file_is_named_before_any_step(fsc_main, tmp_path):
    (tmp_path / "e.txt").write_text("")
    res = fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2",
                   "--train-steps", "1", "--out", tmp_path / "run", "--store",
                   tmp_path / "e.txt", check=2)
    assert "is not a directory (--store and $FSC_STORE name the folder" in res.stderr
    assert not (tmp_path / "run").exists()


def test_a_tokenizer_that_is_not_there_is_named_by_its_option(fsc_main, tmp_path):
    res = fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2",
                   "--train-steps", "1", "--out", tmp_path / "run", "--tokenizer",
                   tmp_path / "nodir", "--store", tmp_path / "st", check=2)
    assert res.stderr.startswith(f"error: --tokenizer {tmp_path / 'nodir'}: no such file")
    assert not (tmp_path / "run").exists()
