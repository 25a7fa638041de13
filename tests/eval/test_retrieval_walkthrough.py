"""fsc eval's retrieval tasks at the command line: the suite knobs a checkpoint recorded, the
options a task does not read, and --task ruler's table."""

import json

import pytest

SUITE_TRAINED = {"data": "ruler", "objective": "frontier", "seq_len": 128,
                 "suite": {"needles": 2, "hops": 2, "words": 2}}


def test_ruler_keeps_the_needles_a_checkpoint_was_trained_with(fsc_main, save_tiny, tmp_path):
    """Trained on ruler with --needles 2 at 128 tokens, --task ruler (its default task) lays
    out niah's multikey, multivalue and multiquery prompts with two needles, as trained, at
    the training length (four would not fit)."""
    ckpt = save_tiny("ruler", training=SUITE_TRAINED)
    res = fsc_main("eval", ckpt, "--depths", "0.5", "--samples", "2", "--lengths", "128",
                   "--export", tmp_path / "x")
    assert res.returncode == 0, res.stderr
    for variant in ("multikey", "multivalue", "multiquery"):
        doc = json.loads((tmp_path / "x" / f"fsc_niah_{variant}_128.jsonl").open().readline())
        assert len(doc["outputs"]) == (1 if variant == "multikey" else 2)
        assert doc["input"].count(" The pass key of ") == 2
    single = json.loads((tmp_path / "x" / "fsc_niah_single_128.jsonl").open().readline())
    assert single["input"].count("Remember it.") == 1  # the passkey task, one needle


@pytest.mark.parametrize("task, extra", [("mqar", ()), ("vt", ("--hops", "1")),
                                         ("cwe", ("--words", "1")), ("fwe", ("--words", "1"))])
def test_needle_digits_is_refused_by_a_task_without_a_pass_key(fsc_main, tmp_path, task, extra):
    res = fsc_main("eval", "tiny_hybrid", "--task", task, "--needle-digits", "5", *extra,
                   "--lengths", "256", "--samples", "1", "--store", tmp_path / "st")
    assert res.returncode == 2
    assert res.stderr.strip() == ("error: --needle-digits: for --task niah, ruler or loss only "
                                  f"(this is {task})")


def test_the_ruler_table_lists_the_parts_in_the_suites_order(fsc_main, tmp_path):
    """Whatever --depths says (niah's cells sort after vt's at depth 0.5), the rows are niah's
    variants, vt, cwe, fwe, then their average."""
    res = fsc_main("eval", "tiny_hybrid", "--task", "ruler", "--needles", "2", "--hops", "1",
                   "--words", "1", "--lengths", "128", "--depths", "0.5", "--samples", "1",
                   "--store", tmp_path / "st")
    assert res.returncode == 0, res.stderr
    rows = [line.split("│")[1].strip() for line in res.stdout.splitlines()
            if line.startswith("│")]
    assert rows == ["niah single", "niah multikey", "niah multivalue", "niah multiquery", "vt",
                    "cwe", "fwe", "average"]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_what_training_read_is_what_eval_reads_from_anywhere(fsc_main, tmp_path, ar_recipe,
                                                             monkeypatch):
    """The checkpoint recorded --data as typed (relative: `fsc eval --task genppl` run from
    another directory found no file) and neither --text-field nor --pairs, so eval read the
    field `text` and asked 8 pairs of a model trained with others. The file is recorded by its
    path, the knobs as given, and eval uses them."""
    import json

    text = "The quick brown fox jumps over the lazy dog. " * 40
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "plain.jsonl").write_text(json.dumps({"body": text}) + "\n")
    monkeypatch.chdir(tmp_path / "a")
    fsc_main("train", "tiny_attn", "--data", "plain.jsonl", "--text-field", "body", "--seq-len",
             "32", "--train-steps", "1", "--batch", "2", "--out", tmp_path / "text",
             "--store", tmp_path / "st", check=0)
    fsc_main("train", "tiny_attn", "--data", "mqar", "--pairs", "2", "--seq-len", "64",
             "--train-steps", "1", "--batch", "2", "--out", tmp_path / "mqar",
             "--store", tmp_path / "st", check=0)
    trained = json.loads((tmp_path / "text" / "step-000001" / "config.json").read_text())
    assert trained["training"]["data"] == str(tmp_path / "a" / "plain.jsonl")
    assert trained["training"]["text_field"] == "body"
    monkeypatch.chdir(tmp_path / "b")
    res = fsc_main("eval", tmp_path / "text", "--task", "genppl", "--scorer", ar_recipe,
                   "--samples", "2", "--lengths", "12", "--prompt-length", "8", "--json",
                   "--store", tmp_path / "st", check=0)
    assert json.loads(res.stdout)["rows"]
    res = fsc_main("eval", tmp_path / "mqar", "--task", "mqar", "--lengths", "64",
                   "--samples", "2", "--json", "--store", tmp_path / "st", check=0)
    assert {r["pairs"] for r in json.loads(res.stdout)["rows"]} == {2}
