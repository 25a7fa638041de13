"""`fsc eval` keeps what each sample expected and what the cached decoder answered (the
`answers` column, `--json`), and shows the first wrong answer of each cell under its table."""

import json

import pytest

from fsc.store import Store


def _rows(cli, *args):
    r = cli("eval", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)["rows"]


def _exported(cli, tmp_path, *args) -> list[list[str]]:
    """The expected answers of the same prompts, as --export writes them for lm-eval."""
    r = cli("eval", *args, "--export", tmp_path / "ex")
    assert r.code == 0, r.err
    [lines] = [p.read_text().splitlines() for p in (tmp_path / "ex").glob("*.jsonl")]
    return [json.loads(line)["outputs"] for line in lines]


@pytest.mark.parametrize("args", [
    ["tiny_attn", "--lengths", "128", "--depths", "0.5", "--samples", "3"],
    pytest.param(["tiny_mamba", "--task", "cwe", "--lengths", "256", "--samples", "2"],
                 marks=pytest.mark.slow)])
def test_answers_are_the_samples_expected_and_decoded(cli, tmp_path, args):
    [row] = _rows(cli, *args, "--store", tmp_path / "store")
    answers = row["answers"]
    assert [a["expected"] for a in answers] == _exported(cli, tmp_path, *args)
    assert all(isinstance(a["decoded"], str) for a in answers)
    scores = [a["score"] for a in answers]
    assert sum(scores) / len(scores) == (row["score"] if row["task"] == "cwe"
                                         else row["accuracy"])


def test_mqar_answers_are_one_a_query(cli, tmp_path):
    store = ["--store", tmp_path / "store"]
    # mqar: an answer a query; a sample's score is the share of its queries decoded right
    [row] = _rows(cli, "tiny_mamba", "--task", "mqar", "--lengths", "112", "--pairs", "4",
                  "--samples", "3", *store)
    assert len(row["answers"]) == 3
    for a in row["answers"]:
        assert len(a["expected"]) == len(a["decoded"]) == 4
        assert all(len(e) == 2 and e.isdigit() for e in a["expected"])
        assert a["score"] == sum(e == d for e, d in zip(a["expected"], a["decoded"])) / 4
    assert sum(a["score"] for a in row["answers"]) * 4 == row["correct"]
    [one] = _rows(cli, "tiny_mamba", "--task", "mqar", "--lengths", "64", "--pairs", "1",
                  "--samples", "2", *store)  # a list for one query too
    assert all(isinstance(a["decoded"], list) and len(a["decoded"]) == 1 for a in one["answers"])
    # the store holds them as JSON text, read with DuckDB's json functions
    _, got = Store(tmp_path / "store").query(
        "select answers->0->>'decoded' from evaluation where task = 'mqar'")
    assert json.loads(got[0][0]) == row["answers"][0]["decoded"]


def test_the_first_wrong_answer_of_each_cell_is_shown(cli, tmp_path):
    """Seeded weights answer nothing right: each cell shows its first sample's answer."""
    args = ["tiny_attn", "--lengths", "128", "--depths", "0,0.5", "--samples", "2"]
    expected = _exported(cli, tmp_path, *args)
    r = cli("eval", *args, "--store", tmp_path / "store")
    assert r.code == 0, r.err
    out = " ".join(r.out.split())
    assert ("Wrong answers, the first of each cell (2 of 2 cells; every answer: the store's "
            "evaluation.answers, or --json):") in out
    for depth, first in (("0", expected[0]), ("0.5", expected[2])):
        assert f'niah length 128 depth {depth}: expected "{first[0]}", decoded "' in out


@pytest.mark.slow  # the whole suite at one length
def test_the_suites_wrong_answers_follow_its_table(cli, tmp_path):
    """--task ruler scores vt, cwe and fwe before niah's variants; the wrong-answer lines
    follow the table (niah single first), five of the seven cells."""
    r = cli("eval", "tiny_attn", "--task", "ruler", "--lengths", "256", "--depths", "0.5",
            "--samples", "1", "--store", tmp_path / "store")
    assert r.code == 0, r.err
    shown = [line.split(":")[0].strip() for line in r.out.split("Wrong answers")[1].splitlines()[1:]
             if "expected" in line]
    assert shown == ["niah length 256 depth 0.5", "niah multikey length 256 depth 0.5",
                     "niah multivalue length 256 depth 0.5",
                     "niah multiquery length 256 depth 0.5", "vt length 256"]
