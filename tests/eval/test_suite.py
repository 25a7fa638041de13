"""`fsc eval` on the RULER-style suite: answers decoded freely by the cached decoder, scored as
RULER scores them, a row per cell with the task's own columns, and bad input refused in one
line before any model is loaded."""

import json

import pytest
import torch

from fsc.data.ruler import CommonWords, VariableTracking
from fsc.decode import DecodeConfig, generate
from fsc.eval import retrieval, ruler
from fsc.eval.grid import EvalSettings
from fsc.eval.retrieval import decode_answers
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.store import Store
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def test_free_answers_of_several_blocks_are_what_generate_decodes():
    """Free decoding folds each decoded block: the answer is generate()'s greedy one."""
    m = build_model(load_recipe("tiny_hybrid"), seed=3).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.ndim == 2:
                p.mul_(8.0)
    task = VariableTracking(TOK, 192, 4, hops=2)
    samples = [task.sample(i) for i in range(2)]
    first = samples[0].target.index(True)
    got = decode_answers(m, TOK, torch.tensor([s.ids for s in samples]),
                         torch.tensor(samples[0].target), "diffusion", 2)
    assert 192 - first > 4  # several answer blocks
    for b, s in enumerate(samples):
        want = generate(m, TOK, s.ids[:first], DecodeConfig(length=192 - first, G=4, steps=2))
        assert got[b, first:].tolist() == want.token_ids


def test_scores_are_the_expected_strings_found(monkeypatch):
    """A decoder that answers every sample right but drops the first word of odd ones: score
    (1 + 2/3) / 2, one sample of two all found, 5 of the 6 words' tokens right."""
    task = CommonWords(TOK, 256, 4, words=3)
    samples = [task.sample(i) for i in range(2)]

    def answer(model, tokenizer, ids, target, mode, steps):
        out = ids.clone()
        first = int(target.nonzero()[0])
        assert bool(target[first:].all())  # one answer after the prompt: decoded freely
        out[1, first : first + 3] = TOK.encode("???")[0]
        return out

    monkeypatch.setattr(retrieval, "decode_answers", answer)
    got = ruler.scored(None, TOK, samples, EvalSettings("diffusion", 4, 2, 2, 0, 128), "cpu")
    assert got["score"] == pytest.approx((1 + 2 / 3) / 2)
    assert (got["n"], got["correct"], got["accuracy"]) == (2, 1, 0.5)
    assert got["token_accuracy"] == pytest.approx((11 + 8) / 22)


def test_vt_cells_are_stored_with_their_columns(fsc_main, tmp_path):
    store = tmp_path / "store"
    res = fsc_main("eval", "tiny_attn", "--task", "vt", "--hops", "2", "--lengths", "128,192",
                   "--samples", "2", "--store", store, "--json", check=0)
    rows = json.loads(res.stdout)["rows"]
    assert [(r["task"], r["length"], r["hops"], r["chains"], r["haystack"]) for r in rows] == [
        ("vt", 128, 2, 1, "filler"), ("vt", 192, 2, 1, "filler")]
    assert all(0 <= r["score"] <= 1 and r["n"] == 2 and "words" not in r for r in rows)
    _, stored = Store(store).query("select task, hops, score, variant from evaluation "
                                   "order by length")
    assert [(t, h, v) for t, h, _, v in stored] == [("vt", 2, None), ("vt", 2, None)]
    res = fsc_main("eval", "tiny_attn", "--task", "niah", "--variant", "multivalue",
                   "--needles", "2", "--distractors", "1", "--lengths", "192", "--depths", "0.5",
                   "--samples", "2", "--store", store, check=0)
    assert "niah multivalue score" in res.stdout
    _, [row] = Store(store).query("select variant, needles, distractors, depth from evaluation "
                                  "where task = 'niah'")
    assert row == ("multivalue", 2, 1, 0.5)


@pytest.mark.parametrize("args, line", [
    (("--task", "vt", "--hops", "30", "--lengths", "256"),
     "--lengths 256 is shorter than a vt prompt with --hops 30 and --chains 1"),
    (("--task", "niah", "--variant", "multiquery", "--needles", "9", "--lengths", "128"),
     "--lengths 128 is shorter than a niah multiquery prompt with 9 needles"),
    (("--task", "cwe", "--lengths", "64"), "--lengths 64 is shorter than a cwe prompt"),
    (("--task", "niah", "--variant", "several"), "--variant 'several' is not one of single"),
    (("--task", "vt", "--words", "3"), "--words: for --task cwe, fwe or ruler only (this is vt)"),
    (("--task", "mqar", "--haystack", "shakespeare"),
     "--haystack: for --task niah, vt or ruler only"),
])
def test_bad_suite_input_is_one_line_before_any_model(cli, monkeypatch, tmp_path, args, line):
    monkeypatch.setattr("fsc.scale.evaluation.model_to_score", lambda *a: pytest.fail("loaded"))
    r = cli("eval", "tiny_attn", *args, "--store", tmp_path / "store")
    assert r.code == 2 and line in r.err and len(r.err.strip().splitlines()) == 1


def test_a_model_trained_on_a_mix_is_scored_at_its_length_ratios(fsc_main, tmp_path):
    store = tmp_path / "store"
    fsc_main("train", "tiny_attn", "--data", "passkey:1,vt:2", "--seq-len", "192",
             "--train-steps", "2", "--batch", "1", "--eval-every", "2", "--out", tmp_path / "run",
             "--store", store, check=0)
    _, [(accuracy,)] = Store(store).query("select eval_accuracy from training "
                                          "where eval_accuracy is not null")
    assert 0 <= accuracy <= 1  # the in-loop eval: the mean over the mix's tasks
    res = fsc_main("eval", tmp_path / "run", "--task", "vt", "--hops", "2", "--lengths",
                   "192,384", "--samples", "1", "--store", store, "--json", check=0)
    assert [r["length_ratio"] for r in json.loads(res.stdout)["rows"]] == [1.0, 2.0]
    bad = fsc_main("train", "tiny_attn", "--data", "passkey:-1,vt:1", "--seq-len", "192",
                   "--train-steps", "2", "--out", tmp_path / "bad", "--store", store)
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: --data passkey:-1,vt:1: the weight of passkey is -1; a weight is a finite "
        "number >= 0")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_ruler_runs_the_whole_suite_and_averages_it(fsc_main, tmp_path):
    res = fsc_main("eval", "tiny_attn", "--task", "ruler", "--lengths", "224", "--depths", "0.5",
                   "--needles", "2", "--hops", "2", "--samples", "1", "--store",
                   tmp_path / "store", check=0)
    assert "RULER-style score by task × length" in res.stdout and "average" in res.stdout
    _, rows = Store(tmp_path / "store").query("select task, variant from evaluation")
    assert sorted(rows, key=str) == sorted([("niah", v) for v in (
        "single", "multikey", "multivalue", "multiquery")] + [("vt", None), ("cwe", None),
                                                               ("fwe", None)], key=str)


@pytest.mark.parametrize("data, task, variant", [
    ("vt", "vt", None), ("cwe", "cwe", None), ("ruler", "ruler", None),
    ("passkey:2,vt:1", "ruler", None), ("niah_multiquery", "niah", "multiquery"),
    ("passkey", "niah", None)])
def test_the_default_task_of_a_suite_checkpoint(data, task, variant):
    from fsc.eval.request import EvalRequest, checked

    asked = checked(EvalRequest("ckpt"), {"data": data})
    assert (asked.task, asked.variant) == (task, variant)


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_knobs_training_used_are_the_ones_eval_uses(fsc_main, tmp_path):
    store = tmp_path / "store"
    fsc_main("train", "tiny_attn", "--data", "vt", "--hops", "2", "--seq-len", "128",
             "--train-steps", "1", "--batch", "1", "--out", tmp_path / "run", "--store", store,
             check=0)
    res = fsc_main("eval", tmp_path / "run", "--lengths", "128", "--samples", "1", "--store",
                   store, "--json", check=0)
    [row] = json.loads(res.stdout)["rows"]
    assert (row["task"], row["hops"], row["chains"]) == ("vt", 2, 1)
    bad = fsc_main("train", "tiny_attn", "--data", "passkey", "--words", "2", "--seq-len", "128",
                   "--train-steps", "1", "--out", tmp_path / "bad", "--store", store)
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: --words: for --data cwe, fwe, ruler or a mix holding one (this is passkey)")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_niah_figures_draw_the_passkey_cells_alone(fsc_main, tmp_path):
    from fsc.results import select

    store = tmp_path / "store"
    for variant in ("single", "multikey"):
        fsc_main("eval", "tiny_attn", "--task", "niah", "--variant", variant, "--needles",
                 "1" if variant == "single" else "2", "--lengths", "192", "--depths", "0.5",
                 "--samples", "1", "--store", store, check=0)
    st = Store(store)
    runs = select.pick_runs(st, select.NIAH, ["all"])
    assert {r["variant"] for r in select.rows(st, select.NIAH, runs)} == {"single"}


def test_fsc_train_supervises_the_suites_repeats_and_says_what_does_not_fit(fsc_main, tmp_path):
    """At the command line: --supervise-needle trains niah's variants and vt on their repeats
    (the in-loop eval scores the answers alone); a length the repeats do not fit is one line
    naming it, exit 2, nothing trained."""
    store = tmp_path / "store"
    res = fsc_main("train", "tiny_attn", "--data", "niah_multikey,vt", "--needles", "2",
                   "--hops", "2", "--supervise-needle", "--seq-len", "128", "--train-steps", "2",
                   "--batch", "2", "--eval-every", "2", "--out", tmp_path / "run", "--store",
                   store, "--json")
    assert res.returncode == 0, res.stderr
    _, [(accuracy,)] = Store(store).query("select eval_accuracy from training "
                                          "where eval_accuracy is not null")
    assert 0 <= accuracy <= 1
    bad = fsc_main("train", "tiny_attn", "--data", "niah_multikey", "--needles", "2",
                   "--supervise-needle", "--seq-len", "112", "--train-steps", "1", "--out",
                   tmp_path / "bad", "--store", store)
    assert bad.returncode == 2 and bad.stderr.strip() == (
        "error: --seq-len 112 is shorter than a niah multikey prompt with 2 needles and 0 "
        "distractors (115 tokens at G = 4; 116 is the shortest that fits)")
    assert not (tmp_path / "bad").exists()
