"""docs/quality.md walked through as a new user would: what genppl, loss and the quality figure
do with options that would change nothing (refused, in one line, before anything is written),
with a --baseline that reads other tokens, with a task's data or too short a sequence; the
genppl table read plainly (one sample's interval, top-p, the baseline row); the figure's title
and a selection with nothing decoded."""

import json

import pytest

from fsc.checkpoint.io import save_checkpoint
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.store import Store

SMALL = ["--task", "genppl", "--data", "shakespeare", "--samples", "2", "--lengths", "8",
         "--prompt-length", "4"]


def _refused(res, says: str, store) -> None:
    """One `error:` line saying `says`, exit 2, no store written."""
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert res.stderr.startswith("error: ") and len(res.stderr.strip().splitlines()) == 1
    assert not store.exists()


def _char_tokenizer(folder):
    """A tokenizer.json of 128 one-character tokens: not fsc's bytes (ids mean other text)."""
    from tokenizers import Tokenizer, decoders, models

    tok = Tokenizer(models.BPE(vocab={chr(i): i for i in range(128)}, merges=[]))
    tok.decoder = decoders.Fuse()
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def test_a_baseline_with_another_tokenizer_is_refused_before_decoding(fsc_main, tmp_path,
                                                                      ar_recipe):
    """The baseline decodes the checkpoint's prompt ids: under another tokenizer they are
    other text (or ids it has no embedding for: a failed run with cells stored)."""
    model = build_model(load_recipe(ar_recipe), seed=0)
    save_checkpoint(model, tmp_path / "chars", include=(_char_tokenizer(tmp_path / "tok"),))
    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", *SMALL, "--steps", "4", "--scorer", ar_recipe,
                   "--baseline", tmp_path / "chars", "--store", st)
    _refused(res, f"--baseline {tmp_path / 'chars'}: its tokenizer", st)
    assert "is not the checkpoint's (bytes)" in res.stderr


@pytest.mark.parametrize("model, args, says", [
    ("AR", ["--policy", "margin"], "--policy: an autoregressive checkpoint decodes at G 1"),
    ("AR", ["--threshold", "0.9", "--G", "4"], "--G, --threshold: an autoregressive checkpoint"),
    ("tiny_attn", ["--mode", "ar", "--policy", "random", "--threshold", "none"],
     "--policy, --threshold: --mode ar decodes at G 1"),
])
def test_diffusion_options_on_ar_decoding_are_refused(fsc_main, tmp_path, ar_recipe, model,
                                                      args, says):
    """--policy and --threshold would change nothing in an autoregressive decoding (they were
    dropped silently); --G and --steps are named the same way."""
    model = str(ar_recipe) if model == "AR" else model
    st = tmp_path / "st"
    res = fsc_main("eval", model, *SMALL, "--scorer", ar_recipe, *args, "--store", st)
    _refused(res, says, st)


def test_mauve_of_one_sample_is_refused(fsc_main, tmp_path, ar_recipe, monkeypatch):
    """MAUVE compares two distributions: with one sample it was left out without a word."""
    monkeypatch.setattr("fsc.eval.plan.mauve_available", lambda: None)  # with or without it
    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", *SMALL, "--samples", "1", "--steps", "4", "--mauve",
                   "--scorer", ar_recipe, "--store", st)
    _refused(res, "--mauve compares the samples with the reference text as two distributions: "
             "give --samples 2 or more (not 1)", st)


def test_a_task_is_not_text_whatever_the_lengths(fsc_main, tmp_path, ar_recipe):
    """At short lengths a task's own error (its prompt does not fit) hid what is wrong."""
    st = tmp_path / "st"
    passkey = [a if a != "shakespeare" else "passkey" for a in SMALL]
    res = fsc_main("eval", "tiny_attn", *passkey, "--scorer", ar_recipe, "--store", st)
    _refused(res, "--data passkey: genppl draws its prompts and reference text from natural "
             "text", st)


def test_a_missing_baseline_is_named_by_its_option(fsc_main, tmp_path, ar_recipe):
    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", *SMALL, "--scorer", ar_recipe, "--baseline",
                   "no/such/dir", "--store", st)
    _refused(res, "error: --baseline no/such/dir: no such", st)


def test_an_ar_loss_of_one_token_is_refused(fsc_main, tmp_path, ar_recipe):
    """An autoregressive loss reads the first token as given: a one-token sequence has nothing
    scored (it was an internal error, exit 1, and a failed run)."""
    st = tmp_path / "st"
    res = fsc_main("eval", ar_recipe, "--task", "loss", "--data", "shakespeare", "--lengths",
                   "1,8", "--samples", "2", "--store", st)
    _refused(res, "--lengths 1: an autoregressive model's loss", st)


def test_the_genppl_table_reads_plainly(fsc_main, tmp_path, ar_recipe, monkeypatch):
    """One sample: its interval is one dash, not three; --top-p is named with the decoding;
    the baseline row says it is the baseline (its recipe may be the checkpoint's)."""
    from fsc.cli import common

    monkeypatch.setattr(common.out, "width", 160)
    res = fsc_main("eval", "tiny_attn", *SMALL, "--samples", "1", "--steps", "4", "--top-p",
                   "0.9", "--scorer", ar_recipe, "--baseline", ar_recipe,
                   "--store", tmp_path / "st", check=0)
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in res.stdout.splitlines() if line.startswith("│")}
    assert set(rows) == {"reference text", "G 4 K 4 T 1 top-p 0.9",
                         "ar T 1 top-p 0.9 (baseline tiny_ar)"}, res.stdout
    assert {r[1] for r in rows.values()} == {"–"}  # the 95 % interval of one sample
    assert "–––" not in res.stdout


def test_genppl_reads_the_val_split_of_a_corpus_trained_on_its_train_split(fsc_main, tmp_path,
                                                                         ar_recipe):
    """Without --data, a checkpoint trained on `shakespeare:train` drew its prompts and
    reference text from the training split, not the validation text the docs promise."""
    model = build_model(load_recipe("tiny_attn"), seed=0)
    save_checkpoint(model, tmp_path / "ck", training={
        "objective": "blocks", "steps": 1, "data": "shakespeare:train", "seq_len": 16,
        "final_loss": 5.0})
    args = [a for a in SMALL if a not in ("--data", "shakespeare")]

    def reference(*more) -> float:
        res = fsc_main("eval", tmp_path / "ck", *args, "--steps", "1", "--scorer", ar_recipe,
                       *more, "--store", tmp_path / "st", "--json", check=0)
        return json.loads(res.stdout)["rows"][0]["gen_ppl"]

    assert reference() == reference("--data", "shakespeare:val")


def test_the_quality_figure_names_the_prompt_length_and_never_draws_nothing(fsc_main, tmp_path,
                                                                            ar_recipe):
    from fsc.results import plots

    st = tmp_path / "st"
    fsc_main("eval", "tiny_attn", *SMALL, "--steps", "4", "--scorer", ar_recipe, "--store", st,
             check=0)
    title = plots.draw(Store(st), "quality").figure.get_suptitle()
    assert "shakespeare:val, 8 tokens, after 4-token prompts" in title
    out = tmp_path / "q.png"
    res = fsc_main("plot", "quality", "--where", "policy = 'margin'", "--out", out,
                   "--store", st)
    assert res.returncode == 2 and "error: nothing to plot: no decoded genppl cell" in res.stderr
    assert not out.exists()  # not a figure of axes around nothing


@pytest.mark.slow  # transformers saves, fsc imports, genppl scores under transformers
def test_a_scorer_that_is_the_published_model_the_checkpoint_was_imported_from_flatters(
        fsc_main, tmp_path):
    """`fsc eval IMPORT --scorer FOLDER`, FOLDER the transformers model IMPORT was imported
    from (not trained since): the same weights under two paths, scored by themselves; the
    warning was given only for the same path."""
    pytest.importorskip("transformers")
    from test_hf_scorer import CHARS, _char_tokenizer

    from tests.imports.published import save_published

    folder = save_published("llama", tmp_path / "hf", seed=2, vocab_size=len(CHARS) + 2)
    _char_tokenizer(folder)
    fsc_main("import", folder, "--out", tmp_path / "ck", "--store", tmp_path / "st", check=0)
    small = ["--task", "genppl", "--data", "shakespeare", "--samples", "2", "--lengths", "4",
             "--prompt-length", "4", "--store", tmp_path / "st", "--json"]
    res = fsc_main("eval", tmp_path / "ck", "--scorer", folder, *small, check=0)
    err = " ".join(res.stderr.split())
    assert (f"warning: --scorer {folder} holds the weights of the checkpoint it scores "
            f"({tmp_path / 'ck'}, imported from {folder.resolve()} and not trained since)") in err
    assert "flatters them" in err


def test_a_temperature_too_small_to_divide_by_is_refused(fsc_main, tmp_path, ar_recipe):
    """genppl at --temperature 1e-320 divided the logits into inf and sampled from NaN (an
    internal error, exit 1, a failed run); the decoder's own config refuses it too (the
    harness builds one from a request's temperature)."""
    from fsc.decode import DecodeConfig
    from fsc.errors import UsageError

    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", *SMALL, "--scorer", ar_recipe, "--temperature",
                   "1,1e-320", "--store", st)
    _refused(res, "--temperature 1e-320: give 0 (greedy) or at least 1e-05", st)
    with pytest.raises(UsageError, match="temperature 1e-320"):
        DecodeConfig(length=4, G=4, steps=4, temperature=1e-320).check()


def test_an_ar_checkpoint_decoded_by_diffusion_is_warned_of(fsc_main, tmp_path, ar_recipe):
    """genppl's block-diffusion cells of a checkpoint trained autoregressively (G 1) decode
    outside what it learned: said (as `fsc decode` notes it), and kept with the run."""
    model = build_model(load_recipe(ar_recipe), seed=0)
    save_checkpoint(model, tmp_path / "ar", training={
        "objective": "ar", "steps": 1, "data": "shakespeare", "seq_len": 16, "final_loss": 5.0})
    st = tmp_path / "st"
    said = "is autoregressive (G 1), never trained to denoise"
    res = fsc_main("eval", tmp_path / "ar", *SMALL, "--scorer", ar_recipe, "--mode",
                   "diffusion", "--store", st, "--json", check=0)
    assert f"warning: {tmp_path / 'ar'} {said}" in res.stderr
    _, [(config,)] = Store(st).query("select config from runs where run_id = "
                                     f"'{json.loads(res.stdout)['run_id']}'")
    assert any(said in w for w in json.loads(config)["warnings"])
    res = fsc_main("eval", tmp_path / "ar", *SMALL, "--scorer", ar_recipe, "--store", st,
                   check=0)
    assert said not in res.stderr


def test_bits_per_byte_counts_the_bytes_of_the_tokens_scored(tmp_path):
    """An AR loss scores every token but the first: its bytes were taken as the sample's bytes
    × (L - 1) / L, right only where every token is one byte; and a byte sample that begins
    inside a character was counted as U+FFFD's three bytes."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from fsc.eval.loss import scored_bytes
    from fsc.tokenizer import ByteTokenizer, HFTokenizer

    assert scored_bytes(ByteTokenizer(), [0xA9, 0x61, 0x62], False) == 3  # (was 5)
    assert scored_bytes(ByteTokenizer(), [0xA9, 0x61, 0x62], True) == 2
    words = Tokenizer(models.WordLevel({"hello": 0, "to": 1, "x": 2, "<mask>": 3}, "x"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.save(str(tmp_path / "tokenizer.json"))
    tok = HFTokenizer(tmp_path)
    ids = [0, 1, 2]  # "hello", "to", "x": 5, 2 and 1 bytes, decoded "hello to x"
    assert scored_bytes(tok, ids, False) == 10
    assert scored_bytes(tok, ids, True) == 5  # " to x" (was 10 × 2 / 3)


def test_a_scorer_without_data_names_what_asked_for_genppl(fsc_main, tmp_path, ar_recipe):
    """`fsc eval CKPT --scorer S` (no --task) runs genppl; without --data it said "--task
    genppl needs --data", an option never typed."""
    st = tmp_path / "st"
    res = fsc_main("eval", "tiny_attn", "--scorer", ar_recipe, "--store", st)
    _refused(res, "error: --scorer asks for --task genppl, which needs --data", st)


def test_bits_per_byte_of_an_ar_loss_at_the_command_line(fsc_main, tmp_path, ar_recipe):
    """`fsc eval --task loss` of an AR checkpoint whose tokens are words: every sample of 4
    tokens of "hello hello ..." decodes to 23 bytes, of which the 3 scored tokens (after the
    given first) hold 18; the old count, 23 × 3 / 4, made bits/byte 4 % low."""
    import math

    from tokenizers import Tokenizer, models, pre_tokenizers

    words = Tokenizer(models.WordLevel({"hello": 0, "x": 1}, "x"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    (tmp_path / "tok").mkdir()
    words.save(str(tmp_path / "tok" / "tokenizer.json"))
    model = build_model(load_recipe(ar_recipe), seed=0)
    save_checkpoint(model, tmp_path / "ar", include=(tmp_path / "tok" / "tokenizer.json",),
                    training={"objective": "ar", "steps": 1, "data": "copy", "seq_len": 4,
                              "final_loss": 5.0})
    (tmp_path / "hello.txt").write_text("hello " * 300)
    res = fsc_main("eval", tmp_path / "ar", "--task", "loss", "--data", tmp_path / "hello.txt",
                   "--lengths", "4", "--samples", "2", "--store", tmp_path / "st", "--json",
                   check=0)
    [row] = json.loads(res.stdout)["rows"]
    assert row["bits_per_byte"] == pytest.approx(row["loss"] * 3 / math.log(2) / 18, rel=1e-9)
