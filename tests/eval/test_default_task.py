"""fsc eval without --task scores what the checkpoint was trained on, or says which task fits."""

import pytest

from fsc.eval.request import EvalRequest, default_task


@pytest.mark.parametrize("data, scorer, task", [
    ("passkey", None, "niah"), ("mqar", None, "mqar"), ("copy", None, "copy"),
    ("shakespeare", None, "loss"),
    ("notes.txt", None, "loss"), (None, None, "niah"), ("shakespeare", "scorer", "genppl")])
def test_the_default_task_follows_the_training_data(data, scorer, task):
    assert default_task(EvalRequest("ckpt", scorer=scorer), data) == task


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_text_checkpoint_is_scored_on_its_corpus_held_out_split(fsc_main, tmp_path):
    """fsc eval CKPT of a checkpoint trained on shakespeare runs its default task, loss, on
    shakespeare's val split without --data; after a text file (no held-out part) it says so."""
    (tmp_path / "notes.txt").write_text("The grass is green. " * 40)
    for data, out in (("shakespeare", "sh"), ("notes.txt", "nt")):
        fsc_main("train", "tiny_attn", "--data", data, "--seq-len", "32", "--train-steps", "1",
                 "--batch", "2", "--out", tmp_path / out, "--store", tmp_path / "st", check=0)
    import json

    def row(*extra):
        return json.loads(fsc_main("eval", tmp_path / "sh", "--samples", "2", *extra, "--store",
                                   tmp_path / "st", "--json", check=0).stdout)["rows"][0]

    got, val = row(), row("--data", "shakespeare:val")
    assert got["task"] == "loss"
    assert (got["loss"], got["distinct_sequences"]) == (val["loss"], val["distinct_sequences"])
    res = fsc_main("eval", tmp_path / "nt", "--samples", "2", "--store", tmp_path / "st")
    said = " ".join(res.stderr.split())  # (the file by the path training recorded)
    assert res.returncode == 2 and f"trained on {tmp_path / 'notes.txt'}, whose loss" in said
    assert len(res.stderr.splitlines()) == 1
