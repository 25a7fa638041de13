"""fsc eval without --task scores what the checkpoint was trained on, or says which task fits."""

import pytest

from fsc.errors import UsageError
from fsc.scale.evaluation import EvalRequest, default_task


@pytest.mark.parametrize("data, scorer, task", [
    ("passkey", None, "niah"), ("mqar", None, "mqar"), ("shakespeare", None, "loss"),
    ("notes.txt", None, "loss"), (None, None, "niah"), ("shakespeare", "scorer", "genppl")])
def test_the_default_task_follows_the_training_data(data, scorer, task):
    assert default_task(EvalRequest("ckpt", scorer=scorer), data) == task


def test_a_copy_checkpoint_is_told_which_task_fits(fsc_main, tmp_path):
    fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "1",
             "--batch", "2", "--out", tmp_path / "cp", "--store", tmp_path / "st", check=0)
    res = fsc_main("eval", tmp_path / "cp", "--store", tmp_path / "st")
    assert res.returncode == 2 and "trained on copy" in res.stderr
    assert "--task loss --data copy" in res.stderr and len(res.stderr.splitlines()) == 1
    with pytest.raises(UsageError, match="trained on copy"):
        default_task(EvalRequest("cp"), "copy")
