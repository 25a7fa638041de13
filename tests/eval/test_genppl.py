"""genppl: the Gen-PPL fsc reports is the perplexity the scorer gives the text (checked on a
path of its own: the scorer's cached decoder, and transformers' loss), every cell decodes the
same prompts, the reference row is the data's own text, and bad input is one line."""

import json
import math

import pytest
import torch

from fsc.eval import genppl
from fsc.eval.grid import EvalGrid
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer

SMALL = ["--task", "genppl", "--data", "shakespeare", "--samples", "3", "--lengths", "12",
         "--prompt-length", "8"]


def _doc(fsc_main, *args):
    res = fsc_main("eval", *args, "--json", check=0)
    return json.loads(res.stdout)


def _cached_nll(model, context: list[int], continuation: list[int]) -> float:
    """The scorer's NLL by its cached decoder: fold one token at a time, read the next."""
    cache = model.empty_cache(1, len(context) + len(continuation), block_size=1)
    total, ids = 0.0, context + continuation
    with torch.no_grad():
        for i in range(len(ids) - 1):
            logits = model.fold(torch.tensor([[ids[i]]]), cache)[0, -1].double()
            if i + 1 >= len(context):
                total -= float(torch.log_softmax(logits, -1)[ids[i + 1]])
    return total


def test_genppl_is_the_scorers_perplexity_of_the_text(fsc_main, tmp_path, ar_recipe):
    doc = _doc(fsc_main, "tiny_hybrid", *SMALL, "--steps", "1,4", "--scorer", ar_recipe,
               "--store", tmp_path / "st")
    rows = doc["rows"]
    assert [(r["mode"], r["K"]) for r in rows] == [("reference", None), ("diffusion", 1),
                                                   ("diffusion", 4)]
    scorer = build_model(load_recipe(ar_recipe), seed=0).eval()
    # the reference row: the data's own continuations of the drawn prompts
    grid = EvalGrid("x", "x", "x", 4, 4, "genppl", (12,), (), (), _settings(), None,
                    "shakespeare", None, None, _gen(8))
    samples = genppl.draws(grid, genppl.text_tokens(grid, ByteTokenizer(), 12), 12)
    nll = sum(_cached_nll(scorer, p, r) for p, r in samples)
    want = math.exp(nll / (3 * 12))
    ref = rows[0]
    assert ref["gen_ppl"] == pytest.approx(want, rel=1e-6)
    assert ref["gen_ppl_lo"] <= ref["gen_ppl"] <= ref["gen_ppl_hi"]
    assert ref["scored_tokens"] == 36 and ref["n"] == 3
    for r in rows[1:]:
        assert r["tokens_per_s"] > 0 and r["passes_per_token"] > 0 and r["entropy"] > 0
        assert r["gen_ppl"] > 0 and r["scorer"].startswith("tiny_ar")
    # 12 tokens, 3 blocks of 4: K = 1, one step a block; K = 4, four; and a fold after each
    # block but the last (nothing reads it)
    assert rows[1]["passes_per_token"] == pytest.approx((3 * 1 + 2) / 12)
    assert rows[2]["passes_per_token"] == pytest.approx((3 * 4 + 2) / 12)


def _settings():
    from fsc.eval.grid import EvalSettings

    return EvalSettings("diffusion", 4, 3, 3, 0, None)


def _gen(prompt_length):
    from fsc.eval.grid import GenSettings

    return GenSettings((), prompt_length, "unused")


def test_genppl_rows_are_stored_and_seeded(fsc_main, tmp_path, ar_recipe):
    from fsc.store import Store

    args = ["tiny_attn", *SMALL, "--steps", "2", "--temperature", "1", "--scorer", ar_recipe,
            "--store", tmp_path / "st"]
    first, again = _doc(fsc_main, *args), _doc(fsc_main, *args)
    assert [r["gen_ppl"] for r in first["rows"]] == [r["gen_ppl"] for r in again["rows"]]
    _, rows = Store(tmp_path / "st").query(
        "select mode, K, policy, temperature, gen_ppl, entropy, scorer from evaluation "
        "where task = 'genppl' order by recorded_at, mode")
    assert len(rows) == 4 and {r[0] for r in rows} == {"reference", "diffusion"}
    assert all(r[4] > 0 and r[5] > 0 for r in rows)


def test_an_ar_checkpoint_is_one_ar_row_and_a_baseline_is_another(fsc_main, tmp_path, ar_recipe,
                                                                 save_tiny):
    twin = tmp_path / "twin.yaml"  # the same weights under another name
    twin.write_text(ar_recipe.read_text().replace("name: tiny_ar", "name: tiny_twin"))
    doc = _doc(fsc_main, ar_recipe, *SMALL, "--scorer", ar_recipe, "--baseline", twin,
               "--store", tmp_path / "st")
    modes = [(r["mode"], r["G"], r["K"]) for r in doc["rows"]]
    assert modes == [("reference", None, None), ("ar", 1, 0), ("ar", 1, 0)]
    # the prompt's fold predicts the first token, each fold after it the next: 11 for 12
    assert doc["rows"][1]["passes_per_token"] == pytest.approx(11 / 12)
    # the same weights decoded the same way on the same prompts: the same samples
    assert doc["rows"][1]["gen_ppl"] == doc["rows"][2]["gen_ppl"]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_scorer_that_flatters_or_judges_nothing_is_warned_of(fsc_main, tmp_path, ar_recipe):
    """The checkpoint scored as its own scorer, a --baseline that is the scorer (a training
    directory and its step are the same weights), and a recipe's seeded weights as the scorer:
    each a `warning:` line on stderr, kept in the run's config; a trained scorer of another
    checkpoint, none."""
    from fsc.checkpoint.io import save_checkpoint
    from fsc.store import Store

    model = build_model(load_recipe(ar_recipe), seed=0)
    save_checkpoint(model, tmp_path / "ar" / "step-000001", training={
        "objective": "ar", "steps": 1, "data": "shakespeare", "seq_len": 16, "final_loss": 5.0})
    (tmp_path / "ar" / "latest").write_text("step-000001")
    st = tmp_path / "st"

    def warned(*args) -> list[str]:
        res = fsc_main("eval", *args, *SMALL, "--store", st, "--json")
        assert res.returncode == 0, res.stderr
        lines = [line for line in res.stderr.splitlines() if line.startswith("warning: ")]
        _, [(config,)] = Store(st).query("select config from runs where run_id = "
                                         f"'{json.loads(res.stdout)['run_id']}'")
        assert json.loads(config)["warnings"] == [line.removeprefix("warning: ") for line in lines]
        return lines

    itself = warned("ar", "--scorer", "ar/step-000001", "--baseline", "ar")
    assert len(itself) == 2 and all("ar/step-000001" in w and "flatters" in w for w in itself)
    assert "is the checkpoint it scores" in itself[0] and "is the --baseline" in itself[1]
    [seeded] = warned("tiny_attn", "--steps", "4", "--scorer", ar_recipe)
    assert f"--scorer {ar_recipe}: seeded random weights (untrained)" in seeded
    assert warned("tiny_attn", "--steps", "4", "--scorer", "ar") == []
    # a training from a recipe stopped before its first step keeps its seeded weights as step 0
    save_checkpoint(model, tmp_path / "ar0" / "step-000000", seed=0, training={
        "objective": "ar", "steps": 0, "data": "shakespeare", "seq_len": 16, "final_loss": None})
    [seeded] = warned("tiny_attn", "--steps", "4", "--scorer", "ar0/step-000000")
    assert "ar0/step-000000: seeded random weights (untrained)" in seeded


@pytest.mark.parametrize("args, says", [
    (["--scorer", "tiny_attn"], "a scorer must be autoregressive"),
    (["--scorer", "no/such/dir"], "--scorer no/such/dir"),
    ([], "--task genppl needs --scorer"),
    (["--scorer", "AR", "--steps", "8"], "--steps 8 must be between 1 and G = 4"),
    (["--scorer", "AR", "--policy", "best"], "--policy 'best' is not one of"),
    (["--scorer", "AR", "--threshold", "1.5"], "--threshold: '1.5' is not a number in (0, 1]"),
    (["--scorer", "AR", "--baseline", "tiny_attn"], "--baseline tiny_attn: a block-diffusion"),
    (["--scorer", "AR", "--depths", "0.5"], "--depths: for --task niah or ruler only (this is genppl)"),
    (["--scorer", "AR", "--pairs", "4"], "--pairs: for --task mqar (or loss on mqar data)"),
    (["--scorer", "AR", "--lengths", "10m", "--prompt-length", "8"],
     "fewer than one sequence of --prompt-length 8 + --lengths 10485760 = 10485768"),
])
def test_bad_genppl_input_is_one_line(fsc_main, tmp_path, ar_recipe, args, says):
    args = [str(ar_recipe) if a == "AR" else a for a in args]
    res = fsc_main("eval", "tiny_hybrid", *SMALL, *args, "--store", tmp_path / "st")
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert not (tmp_path / "st").exists()  # nothing written


def test_genppl_needs_natural_text(fsc_main, tmp_path, ar_recipe):
    res = fsc_main("eval", "tiny_hybrid", "--task", "genppl", "--data", "passkey",
                   "--scorer", ar_recipe, "--store", tmp_path / "st")
    assert res.returncode == 2 and "natural text" in res.stderr


@pytest.mark.slow  # mauve-text's import (faiss, scikit-learn) takes seconds
def test_mauve_sits_beside_genppl(fsc_main, tmp_path, ar_recipe):
    pytest.importorskip("mauve")
    doc = _doc(fsc_main, "tiny_attn", *SMALL, "--samples", "6", "--steps", "4", "--mauve",
               "--scorer", ar_recipe, "--store", tmp_path / "st")
    ref, decoded = doc["rows"]
    assert ref["mauve"] is None and 0 < decoded["mauve"] <= 1
    assert decoded["gen_ppl"] > 0  # shown beside Gen-PPL, never instead


def test_mauve_without_its_package_is_one_line(fsc_main, tmp_path, ar_recipe, monkeypatch):
    import importlib

    real = importlib.import_module

    def missing(name, *args):
        if name == "mauve":
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", missing)
    res = fsc_main("eval", "tiny_attn", *SMALL, "--mauve", "--scorer", ar_recipe,
                   "--store", tmp_path / "st")
    assert res.returncode == 2 and "fsc[quality]" in res.stderr
    assert not (tmp_path / "st").exists()
