"""fsc eval's retrieval and loss tasks at the command line, second pass: what a task draws
from its checkpoint's record, the options it would drop, and the split a haystack is read
from."""

import json

import pytest


def _rows(res) -> list[dict]:
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["rows"]


def test_loss_on_suite_data_draws_it_with_the_knobs_training_recorded(fsc_main, save_tiny,
                                                                       tmp_path):
    """Trained on vt with --hops 2 at 128 tokens, its held-out loss (the task trained on,
    drawn afresh) is read on vt with two hops; four, the default, do not fit 128 tokens and
    the command refused what training ran."""
    ckpt = save_tiny("vt", training={"data": "vt", "objective": "frontier", "seq_len": 128,
                                     "suite": {"hops": 2}})
    rows = _rows(fsc_main("eval", ckpt, "--task", "loss", "--samples", "2", "--json",
                          "--store", tmp_path / "st"))
    assert [(r["task"], r["length"], r["n"]) for r in rows] == [("loss", 128, 2)]


def test_loss_on_mqar_takes_one_pairs_count_and_says_which(fsc_main, tmp_path):
    """--pairs 2,4 scored one cell, of 2 pairs, and the cell named none."""
    res = fsc_main("eval", "tiny_hybrid", "--task", "loss", "--data", "mqar", "--pairs", "2,4",
                   "--lengths", "128", "--samples", "2", "--store", tmp_path / "st")
    assert res.returncode == 2
    assert res.stderr.strip() == ("error: --pairs 2,4: --task loss draws its mqar sequences "
                                  "with one count; give one (a run each)")
    res = fsc_main("eval", "tiny_hybrid", "--task", "loss", "--data", "shakespeare", "--pairs",
                   "2,4", "--lengths", "128", "--store", tmp_path / "st")
    assert res.returncode == 2
    assert res.stderr == "error: --pairs: for --data mqar or a mix holding one (this is shakespeare)\n"
    rows = _rows(fsc_main("eval", "tiny_hybrid", "--task", "loss", "--data", "mqar", "--pairs",
                          "3", "--lengths", "128", "--samples", "2", "--json",
                          "--store", tmp_path / "st"))
    assert [r["pairs"] for r in rows] == [3]


@pytest.mark.parametrize("haystack", ["shakespeare:train", "shakespeare:val", "shakespeare:x"])
def test_a_haystack_names_a_corpus_not_its_split(fsc_main, tmp_path, haystack):
    """`--haystack shakespeare:train` made fsc eval read the training text (fsc train
    --haystack shakespeare:val the validation text), and a wrong split named --data."""
    res = fsc_main("eval", "tiny_hybrid", "--task", "niah", "--haystack", haystack,
                   "--lengths", "256", "--depths", "0.5", "--samples", "1",
                   "--store", tmp_path / "st")
    assert res.returncode == 2
    assert res.stderr.strip() == (f"error: --haystack '{haystack}' is not one of filler, "
                                  "shakespeare (fsc eval reads its validation text, fsc train "
                                  "its training text)")


def test_export_keeps_a_utils_py_of_the_folders_own(fsc_main, tmp_path):
    """A harness task folder holds its own utils.py; --export into it replaced it with the
    suite's metric. It is refused, and the folder left as it was; an earlier export's own
    utils.py is written again."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "utils.py").write_text("def mine(doc):\n    return doc\n")
    args = ("eval", "tiny_hybrid", "--task", "vt", "--hops", "1", "--lengths", "128",
            "--samples", "1", "--export", folder)
    res = fsc_main(*args)
    assert res.returncode == 2
    assert " ".join(res.stderr.split()) == (f"error: --export {folder}: holds a utils.py of its "
                                            "own, which the tasks' metric would replace; "
                                            "export into another folder")
    assert sorted(p.name for p in folder.iterdir()) == ["utils.py"]
    assert (folder / "utils.py").read_text() == "def mine(doc):\n    return doc\n"
    fsc_main(*args[:-1], tmp_path / "ours", check=0)
    fsc_main(*args[:-1], tmp_path / "ours", check=0)
    assert "fsc_vt_128.yaml" in {p.name for p in (tmp_path / "ours").iterdir()}


def test_loss_refuses_a_pass_whose_attention_masks_cannot_fit(fsc_main, tmp_path):
    """The loss reads each sequence in one uncached pass whose attention mask grows with the
    square of the length; the check made was a cached decode's (32 MiB at 1m tokens), and
    the pass ran out of memory."""
    res = fsc_main("eval", "tiny_hybrid", "--task", "loss", "--data", "passkey", "--lengths",
                   "1m", "--store", tmp_path / "st")
    assert res.returncode == 2, res.stderr
    said = " ".join(res.stderr.split())
    assert said.startswith("error: --lengths 1048576: --task loss reads 20 sequences in one "
                           "pass, which needs at least "), said
    assert "(attention masks 200 TiB) but cpu has " in said
    assert said.endswith(" free; lower --batch or --lengths")
    assert not (tmp_path / "st").exists()  # refused before a run was recorded
