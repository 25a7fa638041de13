"""Training and reach, checked by hand: a training state cut short, a store fsc eval cannot use,
a training directory without `latest` given where a checkpoint goes."""

import pytest

COPY = ["tiny_attn", "--data", "copy", "--seq-len", "32", "--batch", "2"]


def _one_line(res, says: str) -> None:
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.splitlines()) == 1 and says in " ".join(res.stderr.split()), res.stderr
    assert res.stdout == ""


@pytest.fixture
def run(fsc_main, tmp_path):
    """A training directory of two saves (step-000001, step-000002), stored in tmp_path/st."""
    fsc_main("train", *COPY, "--train-steps", "2", "--save-every", "1", "--out", "run",
             "--store", tmp_path / "st", check=0)
    return tmp_path / "run"


def test_a_training_state_cut_short_is_named_not_an_internal_error(fsc_main, run, tmp_path):
    """A truncated training_state.safetensors was "internal error (SafetensorError: ...)"."""
    with (run / "step-000002" / "training_state.safetensors").open("r+b") as f:
        f.truncate(50)
    res = fsc_main("train", "--resume", run, "--train-steps", "3", "--store", tmp_path / "st")
    assert res.returncode == 1 and len(res.stderr.splitlines()) == 1, res.stderr
    assert "step-000002: unreadable training state (" in res.stderr
    assert "internal error" not in res.stderr


def test_fsc_eval_checks_the_store_before_any_work(fsc_main, run, tmp_path):
    """A file that is no DuckDB database where the store goes: a DuckDB message, exit 1, once
    the model was loaded; now the store's own line, exit 2, as train, runs and query say."""
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "fsc.duckdb").write_bytes(b"garbage, not a database\n" * 10)
    res = fsc_main("eval", run, "--task", "mqar", "--lengths", "32", "--samples", "1",
                   "--store", tmp_path / "junk")
    _one_line(res, "fsc.duckdb is not a DuckDB database file")


def test_a_training_directory_without_latest_names_its_newest_step(fsc_main, run, tmp_path):
    """eval, decode and train from it said the folder held no checkpoint, no training run and
    no published model, though it held step-NNNNNN checkpoints; --resume named the step."""
    (run / "latest").unlink()
    newest = str(run / "step-000002")
    store = ["--store", tmp_path / "st"]
    for args in (["eval", run, "--task", "mqar", "--samples", "1", *store],
                 ["decode", run, "--prompt", "ab", "--length", "4"],
                 ["train", run, "--data", "copy", "--seq-len", "32", "--train-steps", "1",
                  "--out", tmp_path / "on", *store]):
        _one_line(fsc_main(*args),
                  f"no `latest` file naming its newest step; give that step itself ({newest})")
    _one_line(fsc_main("train", "--resume", run, "--store", tmp_path / "st"),
              f"resume that step itself (--resume {newest})")
    assert not (tmp_path / "on").exists()


def test_a_mix_too_long_for_a_length_names_the_length_every_task_fits(fsc_main, tmp_path):
    """--data ruler at --seq-len 128 named the first task that did not fit (163 tokens); at 164
    the next (181), and so on up to 204: the most any task needs is said at once, with the
    shortest length (a multiple of G) that holds it."""
    res = fsc_main("train", "tiny_hybrid", "--data", "ruler", "--seq-len", "128",
                   "--train-steps", "1", "--out", "r", "--store", tmp_path / "st")
    _one_line(res, "(202 tokens at G = 4; 204 is the shortest that fits)")
    assert not (tmp_path / "r").exists()


def test_a_default_length_too_short_says_it_was_not_given(fsc_main, run, tmp_path):
    """A checkpoint trained at 32 on copy, scored on niah: "--lengths 32 is shorter than ...",
    though no --lengths was given."""
    res = fsc_main("eval", run, "--task", "niah", "--samples", "1", "--store", tmp_path / "st")
    _one_line(res, "--lengths 32 is shorter than a passkey prompt with a 4-digit needle (101 "
              "tokens at G = 4; 104 is the shortest that fits); --lengths was not given: its "
              "default here is 32, 64, 128, 256, 512, from the length trained at (32)")
    res = fsc_main("eval", run, "--task", "niah", "--lengths", "64", "--samples", "1",
                   "--store", tmp_path / "st")
    _one_line(res, "--lengths 64 is shorter than a passkey prompt with a 4-digit needle (101 "
              "tokens at G = 4; 104 is the shortest that fits)")
    assert "not given" not in res.stderr


def test_a_resumed_run_names_its_folder_as_the_first_run_did(fsc_main, tmp_path):
    """The hint after a first run cut short read `fsc train --resume run`; after a resumed
    one, the absolute path the run stored; --json's checkpoint likewise."""
    import json

    store = ["--store", "st"]
    first = fsc_main("train", *COPY, "--train-steps", "4", "--stop-after", "1", "--out", "run",
                     "--json", *store, check=0)
    again = fsc_main("train", "--resume", "run", "--stop-after", "1", "--json", *store, check=0)
    for res, step in ((first, 1), (again, 2)):
        assert json.loads(res.stdout)["checkpoint"] == f"run/step-00000{step}"
        assert res.stderr.endswith("continue with:\n  fsc train --resume run --store st\n")


def test_a_resume_says_when_its_text_file_has_changed(fsc_main, tmp_path):
    """A text file rewritten between a run's stop and its resume was read as it was now, with
    no word: the run was no longer the one it would have been uninterrupted."""
    text = tmp_path / "notes.txt"
    text.write_text("To be, or not to be, that is the question. " * 40)
    store = ["--store", "st"]
    fsc_main("train", "tiny_attn", "--data", text, "--seq-len", "32", "--batch", "2",
             "--train-steps", "4", "--stop-after", "1", "--out", "run", *store, check=0)
    same = fsc_main("train", "--resume", "run", "--stop-after", "1", *store, check=0)
    assert "note:" not in same.stderr
    text.write_text("Whether 'tis nobler in the mind to suffer the slings. " * 40)
    changed = fsc_main("train", "--resume", "run", "--stop-after", "1", *store, check=0)
    assert (f"note: --data {text} has changed since the run read it up to step 2 (1720 → 2160 "
            "bytes): it goes on with the file as it is now") in " ".join(changed.stderr.split())
    again = fsc_main("train", "--resume", "run", *store, check=0)  # said once
    assert "note:" not in again.stderr


def test_a_recipe_trained_at_another_G_is_named_for_it(fsc_main, tmp_path):
    """`fsc train tiny_attn --G 8` trained block_size 8 under the name tiny_attn: plots and
    the report showed two tiny_attn lines, at G 4 and G 8, as an adapted checkpoint's were
    not (NAME-G8)."""
    import json

    common = ["--data", "copy", "--seq-len", "32", "--batch", "2", "--train-steps", "1",
              "--json", "--store", "st"]
    at_8 = json.loads(fsc_main("train", "tiny_attn", "--G", "8", *common, "--out", "g8",
                               check=0).stdout)
    at_4 = json.loads(fsc_main("train", "tiny_attn", "--G", "4", *common, "--out", "g4",
                               check=0).stdout)
    assert (at_8["recipe"], at_4["recipe"]) == ("tiny_attn-G8", "tiny_attn")  # 4: its own G
