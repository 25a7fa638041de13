"""`fsc train` option by option, a second walkthrough: what --resume may not change is refused
(--out, a recipe), a run on a file with its own tokenizer resumes from any directory, the
summary's tok/s is that of the training steps, the checkpoint records the dtype and
--supervise-needle, and bad input (an --eval-every no step reaches, a missing --resume
directory, a bf16 run resumed on the CPU, an empty --seq-len entry, an empty --data) is one
line, exit 2."""

import json

import pytest

from fsc.store import Store

COPY = ["tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2"]


def _one_line(res, says: str) -> None:
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines() == [f"error: {says}"] or (
        len(res.stderr.splitlines()) == 1 and says in res.stderr), res.stderr
    assert res.stdout == ""


@pytest.fixture
def halfway(fsc_main, tmp_path):
    """A copy run of 4 steps stopped after 2: its training directory."""
    fsc_main("train", *COPY, "--train-steps", "4", "--stop-after", "2", "--out",
             tmp_path / "run", "--store", tmp_path / "st", check=0)
    return tmp_path / "run"


def test_resume_refuses_another_out_and_a_recipe(fsc_main, tmp_path, halfway):
    res = fsc_main("train", "--resume", halfway, "--out", tmp_path / "other")
    _one_line(res, "--resume keeps the run's settings; drop --out")
    assert not (tmp_path / "other").exists()
    assert sorted(p.name for p in halfway.iterdir()) == ["latest", "step-000002"]
    res = fsc_main("train", "tiny_attn", "--resume", halfway)
    _one_line(res, "--resume keeps the run's settings; drop RECIPE")  # named once


def test_resume_of_a_missing_directory_says_so(fsc_main, tmp_path):
    res = fsc_main("train", "--resume", tmp_path / "nope")
    _one_line(res, f"--resume {tmp_path / 'nope'}: no such directory")
    assert not (tmp_path / "nope").exists()


def _tokenizer(folder):
    """A character tokenizer with a mask token."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    folder.mkdir()
    vocab = {chr(i): i for i in range(198)} | {"[UNK]": 198, "<|mdm_mask|>": 199}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.add_special_tokens([AddedToken("<|mdm_mask|>", special=True)])
    tok.decoder = decoders.Fuse()
    tok.save(str(folder / "tokenizer.json"))


def test_a_run_on_a_file_with_its_tokenizer_resumes_from_another_directory(
        fsc_main, tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("To be, or not to be, that is the question. " * 20)
    _tokenizer(tmp_path / "tok")
    fsc_main("train", "tiny_attn", "--data", "notes.txt", "--tokenizer", "tok", "--seq-len",
             "32", "--batch", "2", "--train-steps", "4", "--stop-after", "2", "--out", "run",
             "--store", tmp_path / "st", check=0)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    res = fsc_main("train", "--resume", tmp_path / "run", "--store", tmp_path / "st",
                   "--json", check=0)
    assert json.loads(res.stdout)["step"] == 4
    training = json.loads((tmp_path / "run" / "step-000004" / "config.json").read_text())[
        "training"]
    assert training["tokenizer"] == str(tmp_path / "tok")
    assert training["data"] == str(tmp_path / "notes.txt")


def test_the_summary_rate_is_that_of_the_training_steps(fsc_main, tmp_path):
    """tok/s leaves out the in-loop evals and the saves, as the progress bar's rate does:
    the tokens over the steps' own seconds (each step row's tokens over its rate)."""
    res = fsc_main("train", "tiny_attn", "--data", "passkey", "--seq-len", "128", "--batch",
                   "2", "--train-steps", "4", "--eval-every", "1", "--log-every", "1",
                   "--save-every", "1", "--out", tmp_path / "run", "--store", tmp_path / "st",
                   "--json", check=0)
    summary = json.loads(res.stdout)
    _, rows = Store(tmp_path / "st").query(
        "select tokens, tokens_per_s from train_steps order by step")
    tokens = [t for t, _ in rows]
    steps = [t - before for t, before in zip(tokens, [0, *tokens[:-1]], strict=True)]
    seconds = sum(n / rate for n, (_, rate) in zip(steps, rows, strict=True))
    assert summary["tokens_per_s"] == pytest.approx(tokens[-1] / seconds, rel=1e-6)
    assert seconds < summary["seconds"]  # the invocation's time holds the evals and saves


def test_the_checkpoint_records_the_dtype_and_supervise_needle(fsc_main, tmp_path):
    fsc_main("train", "tiny_attn", "--data", "passkey", "--seq-len", "128", "--batch", "2",
             "--train-steps", "1", "--supervise-needle", "--out", tmp_path / "run",
             "--store", tmp_path / "st", check=0)
    training = json.loads((tmp_path / "run" / "step-000001" / "config.json").read_text())[
        "training"]
    assert training["supervise_needle"] is True and training["dtype"] == "fp32"


def test_an_eval_every_no_step_reaches_is_refused(fsc_main, tmp_path):
    res = fsc_main("train", "tiny_attn", "--data", "passkey", "--seq-len", "128",
                   "--train-steps", "4", "--eval-every", "5", "--stop-at", "0.5", "--out",
                   tmp_path / "run", "--store", tmp_path / "st")
    _one_line(res, "--eval-every 5 is longer than --train-steps 4: no in-loop eval would run")
    assert not (tmp_path / "run").exists() and not (tmp_path / "st").exists()


def test_a_bf16_run_resumed_on_the_cpu_is_told_to_go_on_on_cuda(fsc_main, halfway):
    """A run that began on CUDA with --dtype auto trains in bf16 and keeps it; resumed without
    --device cuda it is told so, not about a --dtype the command did not give."""
    state = halfway / "step-000002" / "training_state.json"
    saved = json.loads(state.read_text())
    saved["config"]["dtype"] = "bf16"
    state.write_text(json.dumps(saved))
    res = fsc_main("train", "--resume", halfway)
    _one_line(res, "the run trains in bf16 on CUDA (its --dtype, which a resumed run keeps); "
                   "resume it with --device cuda, not cpu")
    assert sorted(p.name for p in halfway.iterdir()) == ["latest", "step-000002"]


@pytest.mark.parametrize("lengths", ["16,,32", "16,32,", ":2,32"])
def test_an_empty_seq_len_entry_is_named(fsc_main, tmp_path, lengths):
    res = fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", lengths,
                   "--train-steps", "1", "--out", tmp_path / "run")
    _one_line(res, "an empty entry (a comma too many")
    assert not (tmp_path / "run").exists()


def test_help_names_every_objective_and_the_tasks_needle_digits_reads(fsc_main):
    said = " ".join(fsc_main("train", "--help", check=0).stdout.split())
    assert "Train a denoiser (frontier or blocks objective) or next-token (ar)" in said
    assert "--needle-digits NEEDLE_DIGITS passkey, niah_*: digits of the key" in said


@pytest.mark.parametrize("data", ["", " "])
def test_empty_data_is_said_so_not_read_as_the_current_directory(fsc_main, tmp_path, data):
    res = fsc_main("train", "tiny_attn", "--data", data, "--seq-len", "32", "--train-steps",
                   "1", "--out", tmp_path / "run")
    _one_line(res, "--data is empty; give a task, a corpus, a text file or hf:NAME")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # two trainings
def test_training_on_from_a_model_that_begins_with_bos_says_the_steps_will_not(fsc_main,
                                                                              tmp_path):
    """An import whose tokenizer begins a text with BOS, trained on: the steps save `bos:
    false` (training sequences never begin with it) and decode without it, unsaid; a note
    says so. A checkpoint without BOS gets none."""
    from fsc.checkpoint.io import save_checkpoint
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    model = build_model(load_recipe("tiny_attn"), seed=0)
    save_checkpoint(model, tmp_path / "bos", bos=True)
    save_checkpoint(model, tmp_path / "plain")
    run = ("--data", "copy", "--seq-len", "16", "--train-steps", "1", "--batch", "2")
    res = fsc_main("train", "bos", *run, "--out", "a")
    assert res.returncode == 0, res.stderr
    assert ("note: bos begins its text with BOS; training sequences begin without it, so the "
            "steps saved here decode without BOS") in " ".join(res.stderr.split())
    assert json.loads((tmp_path / "a" / "step-000001" / "config.json").read_text())["bos"] is False
    res = fsc_main("train", "plain", *run, "--out", "b")
    assert res.returncode == 0 and "BOS" not in res.stderr, res.stderr
