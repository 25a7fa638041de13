"""fsc decode's prompt: one long prompt from a file, refused on one line (exit 2, nothing on
stdout) before any weight is loaded when it is given twice, cannot be read, or is longer than
fsc's context bound or the memory allows."""

import io
import json

import pytest
import torch
from rich.console import Console

from fsc.blocks import MAX_S
from fsc.decode import folding, prefill
from fsc.errors import UsageError, WeightsDoNotFit
from fsc.loading import check_prompt_fits, decode_bytes
from fsc.model.lm import build_model
from fsc.recipe import load_recipe


def _refused(res, says):
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_a_prompt_file_decodes_as_the_same_prompt_given_inline(fsc_main, tmp_path):
    text = "Once upon a time\nthere was"  # a newline, as a file holds it
    (tmp_path / "p.txt").write_text(text, encoding="utf-8")
    run = ("decode", "tiny_hybrid", "--length", "6", "--json")
    a = json.loads(fsc_main(*run, "--prompt-file", "p.txt", check=0).stdout)
    b = json.loads(fsc_main(*run, "--prompt", text, check=0).stdout)
    assert a["prompt"] == text and a["prompt_ids"] == b["prompt_ids"]
    assert a["token_ids"] == b["token_ids"]


def test_the_text_is_printed_as_it_is_never_broken_at_the_width(fsc_main, tmp_path):
    """`fsc decode ... > out.txt`: the prompt, the generated text and each stats line stay whole
    lines however wide the console (160 columns when stdout is not a terminal)."""
    prompt = " ".join(f"word{i}" for i in range(80))  # 469 characters, one line
    (tmp_path / "p.txt").write_text(prompt, encoding="utf-8")
    res = fsc_main("decode", "tiny_attn", "--prompt-file", "p.txt", "--length", "8", check=0)
    lines = res.stdout.splitlines()
    assert lines[0].startswith(prompt)
    assert [line.split(":")[0] for line in lines[2:]] == ["sampling", "prompt", "weights"]
    assert " tokens generated in " in lines[1]


@pytest.mark.parametrize("args, says", [
    (["--prompt", "hi", "--prompt-file", "p.txt"], "give --prompt or --prompt-file, not both"),
    (["--prompt-ids", "1,2", "--prompt-file", "p.txt"],
     "give --prompt-ids or --prompt-file, not both"),
    (["--prompt-file", "missing.txt"], "--prompt-file missing.txt: cannot read"),
    (["--prompt-file", "."], "--prompt-file .: cannot read (Is a directory)"),
    (["--prompt-file", "/dev/null"], "--prompt-file /dev/null: is not a regular file"),
    (["--prompt-file", "empty.txt"], "--prompt-file empty.txt: is empty"),
    (["--prompt-file", "latin1.txt"], "--prompt-file latin1.txt: not UTF-8 text"),
])
def test_bad_prompt_input_is_one_line_before_any_weight(fsc_main, tmp_path, no_weights, args,
                                                        says):
    (tmp_path / "p.txt").write_text("hi")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    _refused(fsc_main("decode", "tiny_attn", *args), says)


def test_a_prompt_past_the_memory_says_its_length_and_the_limit(fsc_main, tmp_path, monkeypatch,
                                                                no_weights):
    recipe = load_recipe("tiny_attn")
    budget = decode_bytes(recipe, 100, 8, recipe.block_size)[0]  # a 100-token prompt just fits
    monkeypatch.setattr("fsc.loading.free_bytes", lambda device: budget)
    (tmp_path / "long.txt").write_text("x" * 300)
    res = fsc_main("decode", "tiny_attn", "--prompt-file", "long.txt", "--length", "8")
    _refused(res, "the prompt's 300 tokens and --length 8 need")
    assert "at most 100 prompt tokens fit with --length 8" in res.stderr


def test_the_limits_of_a_prompt():
    recipe = load_recipe("tiny_mamba")
    with pytest.raises(UsageError, match=f"past fsc's limit of {MAX_S}; at most {MAX_S - 64} "):
        check_prompt_fits(recipe, "cpu", MAX_S, 64, 4, budget=2**40)
    weights = decode_bytes(recipe, 0, 1, 4)[1]
    with pytest.raises(WeightsDoNotFit, match="weights need"):  # as load_model says it
        check_prompt_fits(recipe, "cpu", 10, 8, 4, budget=weights // 2)
    tight = decode_bytes(recipe, 1, 8, 4)[0] - 1
    with pytest.raises(WeightsDoNotFit, match="not even a 1-token prompt fits"):
        check_prompt_fits(recipe, "cpu", 10, 8, 4, budget=tight)
    check_prompt_fits(recipe, "cpu", 10, 8, 4, budget=decode_bytes(recipe, 10, 8, 4)[0])
    # uncached: no cache, but every step reads the whole sequence
    assert decode_bytes(recipe, 1000, 8, 4, cached=False) != decode_bytes(recipe, 1000, 8, 4)


def test_a_chunked_prefill_fits_a_prompt_one_pass_would_not(fsc_main, tmp_path, monkeypatch,
                                                              no_weights):
    recipe = load_recipe("tiny_attn")
    one_pass = decode_bytes(recipe, 2000, 8, 4)[0]
    budget = decode_bytes(recipe, 2000, 8, 4, chunk=256)[0]
    assert budget < one_pass  # the 2000 × 2000 mask, not 256 × 2000
    check_prompt_fits(recipe, "cpu", 2000, 8, 4, budget=budget, chunk=256)
    with pytest.raises(WeightsDoNotFit, match="the prompt's 2000 tokens"):
        check_prompt_fits(recipe, "cpu", 2000, 8, 4, budget=budget, chunk=0)
    monkeypatch.setattr("fsc.loading.free_bytes", lambda device: budget)
    (tmp_path / "long.txt").write_text("x" * 2000)
    res = fsc_main("decode", "tiny_attn", "--prompt-file", "long.txt", "--length", "8",
                   "--prefill-chunk", "0")
    _refused(res, "the prompt's 2000 tokens and --length 8 need")


def test_fsc_decode_prefills_a_long_prompt_a_chunk_at_a_time(fsc_main, tmp_path):
    """At the command line: --prefill-chunk folds the prompt in passes of whole blocks, counted
    in the stats, and decodes what one pass decodes."""
    (tmp_path / "long.txt").write_text("The grass is green. " * 5)  # 100 tokens
    runs = {}
    for chunk in ("0", "8", "10"):
        res = fsc_main("decode", "tiny_hybrid", "--prompt-file", tmp_path / "long.txt",
                       "--length", "8", "--prefill-chunk", chunk, "--device", "cpu", "--json")
        assert res.returncode == 0, res.stderr
        runs[chunk] = json.loads(res.stdout)
    assert [runs[c]["stats"]["prompt_passes"] for c in ("0", "8", "10")] == [1, 13, 13]
    assert runs["8"]["token_ids"] == runs["0"]["token_ids"] == runs["10"]["token_ids"]


def test_a_fold_of_several_passes_shows_its_progress(fsc_main, tmp_path, monkeypatch):
    """A prompt folded in several passes reports each (tokens folded, of T) once it has run;
    at the command line, on a terminal, as a bar on stderr that is gone when the fold ends."""
    model = build_model(load_recipe("tiny_hybrid"))
    seen = []
    with folding(lambda done, total: seen.append((done, total))):
        prefill(model, torch.zeros(1, 20, dtype=torch.long), model.empty_cache(1, 24, "cpu"), 8)
        prefill(model, torch.zeros(1, 20, dtype=torch.long), model.empty_cache(1, 24, "cpu"), 0)
    prefill(model, torch.zeros(1, 20, dtype=torch.long), model.empty_cache(1, 24, "cpu"), 8)
    assert seen == [(8, 20), (16, 20), (20, 20)]  # (none outside `folding`, none for one pass)
    screen = io.StringIO()
    monkeypatch.setattr("fsc.cli.bars.err", Console(file=screen, force_terminal=True, width=100))
    (tmp_path / "long.txt").write_text("The grass is green. " * 5)  # 100 tokens
    res = fsc_main("decode", "tiny_hybrid", "--prompt-file", "long.txt", "--length", "8",
                   "--prefill-chunk", "8", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["stats"]["prompt_passes"] == 13
    assert "folding the prompt" in screen.getvalue() and "100/100" in screen.getvalue()
    screen.seek(0)
    screen.truncate(0)
    assert fsc_main("decode", "tiny_hybrid", "--prompt-file", "long.txt", "--length", "8",
                    "--json").returncode == 0  # one pass: no bar, nor the empty line of one
    assert screen.getvalue() == ""
    # stderr a log or a pipe: no bar, whose end left an empty line there
    monkeypatch.setattr("fsc.cli.bars.err", Console(file=screen, width=100))
    assert fsc_main("decode", "tiny_hybrid", "--prompt-file", "long.txt", "--length", "8",
                    "--prefill-chunk", "8", "--json").returncode == 0
    assert screen.getvalue() == ""


@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_prompt_ids_decode_as_the_text_they_are(fsc_main, tmp_path, mode):
    """--prompt-ids of a model fsc reads bytes with: the byte tokenizer still decodes (its mask
    for diffusion, its specials never generated, its text printed), so the ids of "Hi" give
    what --prompt Hi gives."""
    from model_checks import sharp_model

    from fsc.checkpoint.io import save_checkpoint

    save_checkpoint(sharp_model("tiny_attn"), tmp_path / "ck", seed=5)
    run = ("decode", "ck", "--length", "16", "--mode", mode, "--json")
    text = json.loads(fsc_main(*run, "--prompt", "Hi").stdout)
    ids = json.loads(fsc_main(*run, "--prompt-ids", "72,105").stdout)
    assert ids["prompt_ids"] == text["prompt_ids"] == [72, 105]
    assert ids["token_ids"] == text["token_ids"] and ids["text"] == text["text"]
    assert all(t < 256 or t == 257 for t in ids["token_ids"])  # bytes, or EOS ending it


def test_prompt_ids_decode_a_recipe_of_fewer_ids_than_bytes(fsc_main, tmp_path):
    """A recipe of vocab_size 200 (an imported one, say) decodes --prompt-ids autoregressively
    with ids alone: the byte tokenizer's 260 tokens refused it, though no text is read."""
    text = (load_recipe("tiny_attn").to_yaml()).replace("vocab_size: 288", "vocab_size: 200")
    (tmp_path / "r.yaml").write_text(text)
    run = ("decode", "r.yaml", "--prompt-ids", "1,2,3", "--mode", "ar", "--length", "6",
           "--json")
    cached, uncached = (json.loads(fsc_main(*run, *more, check=0).stdout)
                        for more in ((), ("--no-cache",)))
    assert cached["prompt"] == "1 2 3 " and len(cached["token_ids"]) == 6
    assert cached["token_ids"] == uncached["token_ids"]
    assert all(0 <= t < 200 for t in cached["token_ids"])
    res = fsc_main("decode", "r.yaml", "--prompt-ids", "1,2,3", "--length", "8")
    assert res.returncode == 2 and res.stderr.count("\n") == 1  # diffusion needs a mask


def test_an_autoregressive_decode_records_no_reveal_order(fsc_main):
    """--mode ar reveals one token a pass, in order: its stats hold no policy (as its eval
    cells do), and K 0; a diffusion decode's hold the policy it used."""
    ar = json.loads(fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4",
                             "--mode", "ar", "--json", check=0).stdout)["stats"]
    assert (ar["mode"], ar["policy"], ar["K"]) == ("ar", None, 0)
    diffusion = json.loads(fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4",
                                    "--policy", "margin", "--json", check=0).stdout)["stats"]
    assert (diffusion["mode"], diffusion["policy"]) == ("diffusion", "margin")


def test_prompt_ids_name_the_special_tokens_they_hold(fsc_main):
    """The mask, EOS or a later BOS among --prompt-ids is read as given (no mask of the prompt
    is filled, no EOS of it ends the decode): a note names each, where they went by without a
    word; a BOS first is how a text begins, and is not named."""
    res = fsc_main("decode", "tiny_attn", "--prompt-ids", "256,72,258,105,257,256",
                   "--length", "8", "--json")
    notes = [ln for ln in res.stderr.splitlines() if "special tokens" in ln]
    assert notes == ["note: --prompt-ids holds special tokens, read as given: 258 (MASK) at "
                     "position 2, 257 (EOS) at position 4, 256 (BOS) at position 5; decoding "
                     "fills and stops only in the tokens it generates"]
    assert len(json.loads(res.stdout)["token_ids"]) == 8  # the prompt's EOS ended nothing
    plain = fsc_main("decode", "tiny_attn", "--prompt-ids", "256,72,105", "--length", "4")
    assert "special tokens" not in plain.stderr
