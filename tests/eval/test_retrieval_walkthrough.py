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
