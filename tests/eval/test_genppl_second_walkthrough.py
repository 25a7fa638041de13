"""docs/quality.md's genppl walked through again, its numbers checked by hand: a scorer whose
tokenizer drops text the checkpoint writes (a token's, or any prompt's or reference's) is
refused before anything is scored, not scored on what is left; MAUVE's line names a baseline as
its table row does; a sample that ended at once carries no entropy into the mean."""

import json
import math
import random
from types import SimpleNamespace

import pytest
import torch

from fsc.checkpoint.io import save_checkpoint
from fsc.eval import genppl, textstats
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.seeds import derive
from fsc.store import Store

SMALL = ["--task", "genppl", "--samples", "2", "--lengths", "8", "--prompt-length", "4",
         "--steps", "4"]


def _char_scorer(tmp_path, ar_recipe, chars: list[str]):
    """An autoregressive fsc checkpoint whose tokenizer has one token per character of
    `chars` (no unknown token: a character it lacks is dropped from the text it encodes)."""
    from tokenizers import Tokenizer, decoders, models

    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[]))
    tok.decoder = decoders.Fuse()
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    recipe = load_recipe(ar_recipe).model_copy(update={"vocab_size": len(chars)})
    save_checkpoint(build_model(recipe, seed=0), tmp_path / "chars",
                    include=(tmp_path / "tok" / "tokenizer.json",))
    return tmp_path / "chars"


def _failed(res, says: str, st) -> None:
    """Exit 2, one `error:` line saying `says`, nothing scored and no run left (a failed one,
    of 0 cells, was)."""
    assert res.returncode == 2, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and says in " ".join(res.stderr.split()), res.stderr
    assert "Traceback" not in res.stderr
    if st.exists():
        assert Store(st).query("select count(*) from evaluation")[1] == [(0,)]
        assert Store(st).query("select count(*) from runs")[1] == [(0,)]


def test_a_scorer_that_drops_the_text_of_a_token_the_checkpoint_may_draw_is_refused(
        fsc_main, tmp_path, ar_recipe):
    """A byte-level checkpoint's bytes 128..255 are each U+FFFD as text, which an ASCII
    character tokenizer drops: its samples were scored on what was left (e.g. 91 scorer tokens
    of 96 generated), a Gen-PPL of other text, without a word."""
    scorer = _char_scorer(tmp_path, ar_recipe, [chr(i) for i in range(128)])
    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", *SMALL, "--data", "shakespeare", "--scorer", scorer,
                   "--store", st)
    _failed(res, "its tokenizer cannot encode the text of 128 of the tokens the checkpoint may "
            "sample (id 128, '\ufffd', comes back as '')", st)


def _text_with_accent_in_second_prompt(tmp_path):
    """A text file of ASCII but one 'é' (two bytes, as two ASCII characters were) inside the
    second sample's prompt and outside the first sample's prompt and continuation."""
    base = (("To be, or not to be, that is the question: " * 40)[:1000]).encode()
    grid = SimpleNamespace(gen=SimpleNamespace(prompt_length=4),
                           settings=SimpleNamespace(samples=2, seed=0))
    span = len(base) - 12
    first, second = (random.Random(derive(0, 8, i, 10)).randint(0, span) for i in range(2))
    assert abs(first - second) > 14  # (the seeds' draws: the two windows apart)
    text = base[:second + 1] + "é".encode() + base[second + 3:]
    (tmp_path / "accent.txt").write_bytes(text)
    import torch

    prompt, _ = genppl.draws(grid, torch.tensor(list(text)), 8)[1]
    assert "é" in bytes(prompt).decode("utf-8")
    return tmp_path / "accent.txt"


def test_every_prompt_and_reference_is_checked_not_only_the_first(fsc_main, tmp_path, ar_recipe):
    """Only the first sample's reference continuation was read back: an 'é' in another sample's
    prompt was dropped from the scorer's context without a word."""
    scorer = _char_scorer(tmp_path, ar_recipe, [chr(i) for i in range(128)] + ["\ufffd"])
    data = _text_with_accent_in_second_prompt(tmp_path)
    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", *SMALL, "--data", data, "--scorer", scorer,
                   "--store", st)
    _failed(res, "its tokenizer cannot encode the text (the text", st)
    assert "comes back as" in res.stderr


def test_the_mauve_line_names_the_baseline_as_its_row_does(fsc_main, tmp_path, ar_recipe,
                                                          monkeypatch):
    """`--baseline` with `--mauve`: the table's row read `ar T 1 (baseline tiny_ar)`, the
    MAUVE line under it `ar T 1` (two such lines when the checkpoint is autoregressive too)."""
    from fsc.cli import common

    monkeypatch.setattr(common.out, "width", 160)
    monkeypatch.setattr("fsc.eval.plan.mauve_available", lambda: None)  # with or without it
    monkeypatch.setattr("fsc.eval.mauve.mauve_of", lambda *a: 0.5)  # the line, not the measure
    res = fsc_main("eval", "tiny_attn", *SMALL, "--data", "shakespeare", "--scorer", ar_recipe,
                   "--baseline", ar_recipe, "--mauve", "--store", tmp_path / "st", check=0)
    lines = [line for line in res.stdout.splitlines() if line.startswith("MAUVE")]
    assert lines == ["MAUVE G 4 K 4 T 1: 0.500", "MAUVE ar T 1 (baseline tiny_ar): 0.500"]


def _windowed_scorer(folder, recipe):
    """An autoregressive checkpoint trained (so its record says) at 8 tokens: its window."""
    save_checkpoint(build_model(load_recipe(recipe)), folder, seed=3,
                    training={"objective": "ar", "seq_len": 8})
    return folder


def test_a_scorers_features_are_those_of_its_last_window(tmp_path, ar_recipe):
    """MAUVE's features of a text longer than the scorer's window raised (the last window's
    tokens read with block lengths for all of them)."""
    from fsc.eval.scorers import FscScorer

    scorer = FscScorer(str(_windowed_scorer(tmp_path / "scorer", ar_recipe)), "cpu")
    ids = list(range(40, 60))
    assert scorer.window == 8 and torch.equal(scorer.hidden(ids), scorer.hidden(ids[-8:]))


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_mauve_features_a_text_longer_than_the_scorers_window(fsc_main, tmp_path, ar_recipe,
                                                               monkeypatch):
    """A prompt and sample longer than the scorer was trained at (the quality setup: a scorer
    trained at 128 reads 192) ended `--mauve` in an internal error."""
    seen = []
    monkeypatch.setattr("fsc.eval.mauve.mauve_of", lambda scored, samples, outs, seed: seen.append(
        [scored.scorer.hidden(scored.context(p) + scored.ids(o)) for (p, _), o in
         zip(samples, outs, strict=True)]) or 0.5)
    _windowed_scorer(tmp_path / "scorer", ar_recipe)
    res = fsc_main("eval", "tiny_attn", "--task", "genppl", "--samples", "2", "--lengths", "12",
                   "--prompt-length", "6", "--data", "shakespeare", "--scorer", "scorer",
                   "--mauve", "--store", tmp_path / "st", check=0)
    assert res.returncode == 0, res.stderr
    assert "MAUVE G 4 K 4 T 1: 0.500" in res.stdout and len(seen[0]) == 2


def test_an_empty_sample_carries_no_entropy_into_the_mean():
    """A sample that ended at EOS at once has no tokens: it counted as entropy 0, so a cell of
    samples of entropy 2 with one empty read 1.33, as repetitive as it is not; its repeats,
    like its Gen-PPL, already left it out."""
    assert textstats.unigram_entropy([]) is None
    grid = SimpleNamespace(gen=SimpleNamespace(prompt_length=4, ngram=2),
                           settings=SimpleNamespace(seed=0), data="shakespeare")
    scorer = SimpleNamespace(scorer=SimpleNamespace(name="s"))
    four = [1, 2, 3, 4]  # entropy ln 4
    row = genppl._scored(grid, scorer, [(4.0, 4), (4.0, 4), (0.0, 0)], [four, four, []], 4)
    assert row["entropy"] == pytest.approx(math.log(4)) and row["entropy_se"] == 0
    assert row["gen_ppl"] == pytest.approx(math.e) and row["scored_tokens"] == 8


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_cell_reads_the_scorers_nll_of_its_samples(fsc_main, tmp_path, ar_recipe, monkeypatch):
    """By hand: a decoded cell's Gen-PPL is exp of the scorer's summed NLL over the samples'
    summed tokens (the scorer's log-probabilities read again here, in one causal pass each),
    its entropy the mean of each sample's, its repeats the mean repeated 4-gram fraction; and
    a greedy cell is the same twice."""
    import torch

    from fsc.eval import scorers

    seen = []
    nll = scorers.ScoredText.nll

    def kept(self, prompt, sample):
        seen.append((list(prompt), list(sample)))
        return nll(self, prompt, sample)

    monkeypatch.setattr(scorers.ScoredText, "nll", kept)
    args = ["tiny_attn", *SMALL, "--lengths", "12", "--temperature", "1,0", "--data",
            "shakespeare", "--scorer", ar_recipe, "--store", tmp_path / "st", "--json"]
    rows = json.loads(fsc_main("eval", *args, check=0).stdout)["rows"]
    model = build_model(load_recipe(ar_recipe), seed=0).eval()
    for k, row in enumerate(rows):
        cell, total = seen[2 * k : 2 * k + 2], 0.0
        for prompt, sample in cell:
            ids = prompt + sample
            with torch.no_grad():
                logp = torch.log_softmax(model.forward_blockwise(
                    torch.tensor([ids]), [1] * len(ids))[0].double(), -1)
            total -= sum(float(logp[i - 1, ids[i]]) for i in range(len(prompt), len(ids)))
        tokens = sum(len(s) for _, s in cell)
        assert row["gen_ppl"] == pytest.approx(math.exp(total / tokens), rel=1e-9)
        ents = [-sum(c / len(s) * math.log(c / len(s)) for c in map(s.count, set(s)))
                for _, s in cell]
        assert row["entropy"] == pytest.approx(sum(ents) / 2)
        grams = [[tuple(s[i : i + 4]) for i in range(len(s) - 3)] for _, s in cell]
        assert row["repeat_ngram"] == pytest.approx(
            sum(sum(g in gs[:i] for i, g in enumerate(gs)) / len(gs) for gs in grams) / 2)
    again = json.loads(fsc_main("eval", *args, check=0).stdout)["rows"]
    assert again[2]["temperature"] == 0 and again[2]["gen_ppl"] == rows[2]["gen_ppl"]

