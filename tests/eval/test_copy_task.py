"""fsc eval --task copy: exact match of copy samples by length, decoded as the in-loop eval
decodes them; the task a checkpoint trained on copy is scored on without --task (it was
refused: "no eval task measures" it)."""

import json

import pytest

from fsc.checkpoint.io import save_checkpoint
from fsc.eval import retrieval
from fsc.eval.plan import grid_of
from fsc.eval.request import EvalRequest
from fsc.model.lm import build_model
from fsc.recipe import load_recipe


@pytest.fixture
def copy_ckpt(tmp_path):
    """A seeded tiny_attn checkpoint recorded as trained on copy at 16 tokens."""
    save_checkpoint(build_model(load_recipe("tiny_attn"), seed=0), tmp_path / "cp", training={
        "objective": "frontier", "steps": 1, "data": "copy", "seq_len": 16, "final_loss": 5.0})
    return tmp_path / "cp"


def test_a_copy_checkpoint_is_scored_on_copy_by_default(fsc_main, copy_ckpt, tmp_path):
    grid, _, _ = grid_of(EvalRequest(str(copy_ckpt)))
    assert (grid.task, grid.lengths) == ("copy", (16, 32, 64, 128, 256))  # as niah's: 1-16×
    st = tmp_path / "st"
    res = fsc_main("eval", copy_ckpt, "--lengths", "16,32", "--samples", "2", "--json",
                   "--store", st, check=0)
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["rows"]
    assert [(r["task"], r["length"], r["length_ratio"], r["n"]) for r in rows] == [
        ("copy", 16, 1.0, 2), ("copy", 32, 2.0, 2)]
    expected = rows[1]["answers"][0]["expected"][0]  # a 32-token copy: 12 letters
    assert len(expected) == 12 and set(expected) <= set("abcdefghijklmnop")
    table = fsc_main("eval", copy_ckpt, "--task", "copy", "--lengths", "16", "--samples", "1",
                     "--store", st, check=0).stdout
    assert "copy accuracy by length" in table and "16 (1×)" in table
    res = fsc_main("eval", copy_ckpt, "--task", "copy", "--depths", "0.5", "--store", st)
    assert res.returncode == 2 and len(res.stderr.splitlines()) == 1


def test_a_copy_cell_is_exact_match_of_the_whole_copy(copy_ckpt, monkeypatch):
    """Every letter right scores the sample; one wrong letter scores it 0, the letters it got
    right still counted in token_accuracy."""
    grid, _, tok = grid_of(EvalRequest(str(copy_ckpt), task="copy", samples=3, batch=2))

    def decoder(wrong: bool):
        def decode(model, tokenizer, tokens, target, mode, steps):
            got = tokens.clone()
            if wrong:  # the copy's last letter a q, which no copy holds
                got[:, int(target.nonzero().max())] = tokenizer.encode("q")[0]
            return got
        return decode

    for wrong, accuracy, token_accuracy in ((False, 1.0, 1.0), (True, 0.0, 3 / 4)):
        monkeypatch.setattr(retrieval, "decode_answers", decoder(wrong))
        [cell] = retrieval.copy(None, tok, grid, [16], "cpu")
        assert (cell["task"], cell["n"], cell["correct"]) == ("copy", 3, 3 * (1 - wrong))
        assert (cell["accuracy"], cell["token_accuracy"]) == (accuracy, pytest.approx(
            token_accuracy))
