"""`fsc eval CK --task loss` without --data scores what the checkpoint was trained on, as its
help says: a corpus's held-out split, or a task drawn afresh (the eval draws from a seed of
its own), the same number as naming the task."""

import json
import re

import pytest


def test_loss_of_a_task_trained_checkpoint_defaults_to_that_task(fsc_main, tmp_path):
    run, store = tmp_path / "run", ["--store", tmp_path / "st"]
    fsc_main("train", "tiny_attn", "--data", "passkey", "--seq-len", "128", "--batch", "2",
             "--train-steps", "2", "--out", run, *store, check=0)
    common = ["--task", "loss", "--samples", "2", "--json", *store]
    alone = json.loads(fsc_main("eval", run, *common, check=0).stdout)
    named = json.loads(fsc_main("eval", run, "--data", "passkey", *common, check=0).stdout)
    assert [c["loss"] for c in alone["rows"]] == [c["loss"] for c in named["rows"]]
    assert alone["rows"][0]["loss"] > 0


def test_data_is_named_as_it_is_read():
    from fsc.data.sources import data_name

    assert data_name("shakespeare") == data_name("shakespeare:val") == "shakespeare:val"
    assert data_name("shakespeare:train") == "shakespeare:train"
    assert data_name("passkey:1,vt:1") == "passkey:1,vt:1" and data_name(None) is None


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_loss_cell_names_the_data_it_scored(fsc_main, tmp_path):
    """Two loss runs on different text read as comparable numbers: the rows, the table's title
    and the report did not say what was scored (only the run's config did, under two names for
    one text: shakespeare:val and shakespeare)."""
    store = ["--store", tmp_path / "st"]
    (tmp_path / "notes.txt").write_text("ab cd ef gh ij kl mn op qr st uv wx yz\n" * 4)
    common = ["--task", "loss", "--samples", "2", "--lengths", "16", *store]
    runs = {}
    for data, name in (("shakespeare", "shakespeare:val"),
                       ("notes.txt", str(tmp_path / "notes.txt"))):
        res = fsc_main("eval", "tiny_attn", "--data", data, *common, check=0)
        said = re.search(rf"held-out loss on {re.escape(name)} \(run (\S+)\)",
                         " ".join(res.stdout.split()))  # (a long title wraps)
        assert said, res.stdout + res.stderr
        runs[name] = said.group(1)
    rows = fsc_main("query", "select data, count(*) from evaluation group by data order by data",
                    "--json", *store, check=0).stdout
    assert [r["data"] for r in json.loads(rows)] == sorted(runs)
    fsc_main("report", *runs.values(), "--out", tmp_path / "r.md", *store, check=0)
    table = (tmp_path / "r.md").read_text().split("### Evaluation cells")[1]
    assert "| data |" in table and "| shakespeare:val | 16 |" in table
    assert " ± s.e. | bits/byte |" in table
    loss = json.loads(fsc_main("query", "select loss from evaluation where data = "
                               "'shakespeare:val'", "--json", *store, check=0).stdout)[0]["loss"]
    assert f"| ≤ {loss:.4f} |" in table  # as fsc eval prints it, not to three figures


def test_a_loss_runs_config_holds_only_what_it_read(fsc_main, tmp_path):
    """A loss (or genppl) run recorded niah's depths and mqar's pairs, which it never read:
    `fsc runs show` and the report's provenance showed them as its settings."""
    store = ["--store", tmp_path / "st"]
    run = json.loads(fsc_main("eval", "tiny_attn", "--task", "loss", "--data", "shakespeare",
                              "--samples", "1", "--lengths", "16", "--json", *store,
                              check=0).stdout)["run_id"]
    config = json.loads(fsc_main("runs", "show", run, "--json", *store, check=0).stdout)["config"]
    assert (config["depths"], config["pairs"]) == (None, None) and config["task"] == "loss"
