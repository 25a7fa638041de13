"""`fsc eval CK --task loss` without --data scores what the checkpoint was trained on, as its
help says: a corpus's held-out split, or a task drawn afresh (the eval draws from a seed of
its own), the same number as naming the task."""

import json


def test_loss_of_a_task_trained_checkpoint_defaults_to_that_task(fsc_main, tmp_path):
    run, store = tmp_path / "run", ["--store", tmp_path / "st"]
    fsc_main("train", "tiny_attn", "--data", "passkey", "--seq-len", "128", "--batch", "2",
             "--train-steps", "2", "--out", run, *store, check=0)
    common = ["--task", "loss", "--samples", "2", "--json", *store]
    alone = json.loads(fsc_main("eval", run, *common, check=0).stdout)
    named = json.loads(fsc_main("eval", run, "--data", "passkey", *common, check=0).stdout)
    assert [c["loss"] for c in alone["rows"]] == [c["loss"] for c in named["rows"]]
    assert alone["rows"][0]["loss"] > 0
