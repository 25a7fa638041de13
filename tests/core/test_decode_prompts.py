"""fsc decode --prompts: the prompts of a file decoded in batches, one JSON line a result in the
file's order, each the tokens of its prompt decoded alone (row i with the seed derived from
--seed and i); bad input refused on one line (exit 2, nothing on stdout) before any weight."""

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fsc.checkpoint.io import save_checkpoint
from fsc.decode import PREFILL_CHUNK
from fsc.loading import decode_bytes
from fsc.model.lm import build_model
from fsc.recipe import load_recipe
from fsc.seeds import derive

# lengths 9, 2, 9, 6, 2 tokens: three batches at --batch 2, two of them shared
PROMPTS = ["Once upon", "hi", "Once upan", "a time", "ho"]


def _lines(res) -> list[dict]:
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def _refused(res, says):
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize("name", ["tiny_hybrid",
                                  pytest.param("tiny_mamba", marks=pytest.mark.slow)])
def test_each_sampled_row_is_its_prompt_decoded_alone_with_its_derived_seed(fsc_main, tmp_path,
                                                                            name):
    # a checkpoint: its weights do not depend on --seed, so a row alone takes the row's seed
    save_checkpoint(build_model(load_recipe(name), seed=1), tmp_path / "ckpt", seed=1)
    (tmp_path / "p.jsonl").write_text("".join(
        json.dumps({"id": f"q{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS)))
    run = ("decode", "ckpt", "--length", "6", "--temperature", "1", "--top-p", "0.9")
    res = fsc_main(*run, "--prompts", "p.jsonl", "--batch", "2", "--seed", "3")
    rows = _lines(res)
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(len(PROMPTS))]  # the file's order
    assert [r["stats"]["batch"] for r in rows] == [2, 2, 2, 2, 1]  # in order, lengths mixed
    assert "5 prompts in 3 batches (--batch 2)" in res.stderr
    for i, row in enumerate(rows):
        seed = derive(3, i)
        assert row["prompt"] == PROMPTS[i] and row["stats"]["seed"] == seed
        alone = json.loads(fsc_main(*run, "--prompt", PROMPTS[i], "--seed", str(seed), "--json",
                                    check=0).stdout)
        assert row["prompt_ids"] == alone["prompt_ids"]
        assert row["token_ids"] == alone["token_ids"] and row["text"] == alone["text"]


@pytest.mark.slow
def test_a_row_of_a_recipe_is_decoded_alone_as_the_help_says(fsc_main, tmp_path):
    """On a recipe --seed seeds the weights too, so a row's own seed alone draws other weights:
    the help's way, fsc build --save the weights of --seed, then decode the row from them."""
    assert "fsc build --save them to decode a row alone" in " ".join(
        fsc_main("decode", "--help", check=0).stdout.split())
    (tmp_path / "p.txt").write_text("Once upon\nhi\n")
    sampled = ("--length", "6", "--temperature", "1")
    row = _lines(fsc_main("decode", "tiny_attn", *sampled, "--prompts", "p.txt", "--seed", "3"))[1]
    assert row["stats"]["weights"] == "seeded random weights (seed 3, untrained)"
    fsc_main("build", "tiny_attn", "--seed", "3", "--save", "ck", "--store", "st", check=0)
    alone = json.loads(fsc_main("decode", "ck", *sampled, "--prompt", "hi", "--json", "--seed",
                                str(row["stats"]["seed"]), check=0).stdout)
    assert alone["token_ids"] == row["token_ids"]


@pytest.mark.parametrize("name, mode", [("tiny_hybrid", "diffusion"), ("tiny_mamba", "ar")])
def test_a_text_file_holds_a_prompt_a_line_decoded_greedily_as_alone(fsc_main, tmp_path, name,
                                                                     mode):
    # blank lines (and a CRLF line end) are no part of any prompt
    (tmp_path / "p.txt").write_bytes("\n".join(PROMPTS[:3]).replace("hi", "\r\n  \nhi\r")
                                     .encode())
    run = ("decode", name, "--length", "6", "--mode", mode, "--seed", "2")
    rows = _lines(fsc_main(*run, "--prompts", "p.txt", "--batch", "2"))
    assert [r["prompt"] for r in rows] == PROMPTS[:3]
    for row in rows:  # greedy: the recipe's seeded weights (--seed), whatever a row's seed
        alone = json.loads(fsc_main(*run, "--prompt", row["prompt"], "--json", check=0).stdout)
        assert row["token_ids"] == alone["token_ids"]


@pytest.mark.parametrize("args, says", [
    (["--prompts", "empty.txt"], "--prompts empty.txt: is empty"),
    (["--prompts", "blank.txt"], "--prompts blank.txt: holds no prompt (only blank lines)"),
    (["--prompts", "missing.txt"], "--prompts missing.txt: cannot read"),
    (["--prompts", "bad.jsonl"], "--prompts bad.jsonl: line 3 is not JSON"),
    (["--prompts", "nofield.jsonl"],
     '--prompts nofield.jsonl: line 1 is not an object with a string "prompt" field'),
    (["--prompts", "number.jsonl"],
     '--prompts number.jsonl: line 2 is not an object with a string "prompt" field'),
    (["--prompts", "taken.jsonl"], '--prompts taken.jsonl: line 1: field "text" is one fsc'),
    (["--prompts", "p.txt", "--batch", "0"], "--batch"),
    (["--prompts", "p.txt", "--batch", "-2"], "--batch"),
    (["--prompts", "p.txt", "--prompt", "hi"], "give --prompts or --prompt, not both"),
    (["--prompts", "p.txt", "--prompt-ids", "1,2"], "give --prompts or --prompt-ids, not both"),
    (["--prompts", "p.txt", "--prompt-file", "p.txt"],
     "give --prompts or --prompt-file, not both"),
    (["--prompt", "hi", "--batch", "4"], "--batch 4 goes with --prompts FILE"),
    (["--prompts", "p.txt", "--no-cache"], "--no-cache decodes one prompt (--prompt)"),
    (["--prompt", "hi", "--mode", "ar", "--threshold", "0.5"],
     "--mode ar reveals one token a pass, in order; drop --threshold"),
    (["--prompt", "hi", "--mode", "ar", "--policy", "margin"], "drop --policy"),
    (["empty_dir", "--prompt", "hi"],
     "empty_dir: is a directory with no checkpoint in it"),
    # a lone surrogate, which no tokenizer reads: a JSON escape, or an argument's byte that is
    # not UTF-8 (Python reads it as U+DCxx)
    (["--prompts", "surrogate.jsonl"],
     "--prompts surrogate.jsonl: line 2's prompt is not UTF-8 text (character 2 is the lone "
     "surrogate U+D800)"),
    # an argument's byte that is not UTF-8 is named as the byte the user gave (it was "the
    # lone surrogate U+DCFF", Python's stand-in for byte 0xff)
    (["--prompt", "a\udcffb"], "--prompt is not UTF-8 text (character 2 is the byte 0xff)"),
])
def test_bad_prompts_are_one_line_before_any_weight(fsc_main, tmp_path, no_weights, args, says):
    (tmp_path / "p.txt").write_text("hi\nho\n")
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("\n  \n\r\n")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a"}\n\n{"prompt": "b"\n')
    (tmp_path / "nofield.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "number.jsonl").write_text('{"prompt": "a"}\n{"prompt": 7}\n')
    (tmp_path / "taken.jsonl").write_text('{"prompt": "a", "text": "b"}\n')
    (tmp_path / "surrogate.jsonl").write_text('{"prompt": "a"}\n{"prompt": "a\\ud800b"}\n')
    (tmp_path / "empty_dir").mkdir()
    source, args = (args[0], args[1:]) if args[0] == "empty_dir" else ("tiny_attn", args)
    _refused(fsc_main("decode", source, *args), says)


def test_an_empty_prompt_without_a_bos_names_its_line(fsc_main, tmp_path, no_weights):
    from tokenizers import Tokenizer, models

    folder = tmp_path / "tok"  # a tokenizer with no BOS: an empty prompt has no token
    folder.mkdir()
    vocab = {chr(i): i for i in range(32, 127)} | {"[UNK]": 127}
    Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]")).save(
        str(folder / "tokenizer.json"))
    (tmp_path / "p.jsonl").write_text('{"prompt": "a"}\n{"prompt": ""}\n')
    res = fsc_main("decode", "tiny_attn", "--mode", "ar", "--tokenizer", "tok",
                   "--prompts", "p.jsonl")
    _refused(res, "--prompts p.jsonl: line 2's prompt is empty")


def test_a_model_without_a_tokenizer_asks_for_one_for_a_prompts_file(fsc_main, tmp_path,
                                                                     no_weights):
    """A published folder with no tokenizer reads ids alone; a prompts file is text, so the
    way out is --tokenizer (not --prompt-ids, which --prompts refuses)."""
    folder = Path(__file__).parents[2] / "recipes" / "published" / "Llama-3.1-8B"
    (tmp_path / "p.txt").write_text("hi\n")
    res = fsc_main("decode", str(folder), "--mode", "ar", "--prompts", "p.txt")
    _refused(res, "--prompts p.txt: the model has no tokenizer to read its prompts' text; "
                  "give --tokenizer DIR")


def test_the_summary_says_how_the_file_decoded(fsc_main, tmp_path):
    """The stderr line names the reveal as the single prompt's line does (policy, threshold,
    steps a block) and times the generation apart from the prompts' fold."""
    (tmp_path / "p.txt").write_text("\n".join(PROMPTS) + "\n")
    res = fsc_main("decode", "tiny_attn", "--length", "6", "--prompts", "p.txt", "--batch", "2",
                   "--policy", "margin", "--threshold", "0.5")
    rows = _lines(res)
    said = " ".join(res.stderr.split())
    made = sum(len(r["token_ids"]) for r in rows)
    steps = (sum(r["stats"]["steps_used"] for r in rows)
             / sum(r["stats"]["blocks"] for r in rows))
    assert f"{made} tokens generated in " in said
    assert f"(diffusion, G 4, K 4, margin, τ 0.5, {steps:.2f} steps a block, cached, " in said
    prompt_tokens = sum(len(r["prompt_ids"]) for r in rows)
    assert f"prompts: {prompt_tokens} tokens folded in " in said


def test_the_longest_prompt_is_checked_at_the_batch(fsc_main, tmp_path, monkeypatch, no_weights):
    """The batch that holds the most is checked (prompts of different lengths: each folded
    alone, then merged), and the limit said is the length every prompt cut to it fits at."""
    from fsc.loading import prompts_bytes

    recipe = load_recipe("tiny_attn")
    G = recipe.block_size
    budget = decode_bytes(recipe, 100, 8, G, B=3, mixed=True)[0]  # 3 rows of 100, an upper bound
    monkeypatch.setattr("fsc.loading.free_bytes", lambda device: budget)
    (tmp_path / "p.txt").write_text("x" * 100 + "\n" + "y" * 300 + "\nz\nw\n")
    res = fsc_main("decode", "tiny_attn", "--prompts", "p.txt", "--batch", "3", "--length", "8")
    _refused(res, "--prompts p.txt, line 2: the longest prompt's 300 tokens at --batch 3 and "
                  "--length 8 need")
    n = int(re.search(r"at most (\d+) prompt tokens fit with --length 8 at --batch 3",
                      res.stderr).group(1))
    cut = [min(m, n) for m in (100, 300, 1, 1)]
    assert prompts_bytes(recipe, cut, 8, G, True, 3, PREFILL_CHUNK)[0] <= budget
    assert prompts_bytes(recipe, [min(m, n + 1) for m in (100, 300, 1, 1)], 8, G, True, 3,
                         PREFILL_CHUNK)[0] > budget


def test_the_summary_counts_the_batches_a_sliding_window_decodes(fsc_main, tmp_path):
    """A sliding window decodes a batch per prompt length (fsc.decode.batches): the summary
    counts those batches, each once, and its tokens/s is over their generation."""
    from fsc.recipe import parse_recipe

    data = load_recipe("tiny_hybrid").model_dump(mode="json", exclude_none=True)
    data["attention"]["window"] = 6
    save_checkpoint(build_model(parse_recipe(data), seed=1), tmp_path / "ckpt", seed=1)
    (tmp_path / "p.txt").write_text("\n".join(PROMPTS) + "\n")
    res = fsc_main("decode", "ckpt", "--length", "6", "--prompts", "p.txt", "--batch", "3")
    rows = _lines(res)
    # in order, [0, 1, 2] and [3, 4]; a batch per length, [0, 2], [1, 4] and [3]
    assert [r["stats"]["batch_index"] for r in rows] == [0, 1, 0, 2, 1]
    assert [r["stats"]["batch"] for r in rows] == [2, 2, 2, 1, 2]
    assert "5 prompts in 3 batches (--batch 3)" in res.stderr
    generate_s = sum({r["stats"]["batch_index"]: r["stats"]["generate_s"] for r in rows}.values())
    made = sum(len(r["token_ids"]) for r in rows)
    assert f"{made / generate_s:.1f} tok/s" in res.stderr


def test_a_byte_order_mark_is_no_part_of_the_first_prompt(fsc_main, tmp_path):
    """A prompts file saved with a UTF-8 BOM (as some editors save) decodes as without it."""
    run = ("decode", "tiny_attn", "--length", "4")
    (tmp_path / "p.jsonl").write_text('\ufeff{"prompt": "hi"}\n', encoding="utf-8")
    (tmp_path / "q.jsonl").write_text('{"prompt": "hi"}\n', encoding="utf-8")
    with_bom, without = (_lines(fsc_main(*run, "--prompts", f)) for f in ("p.jsonl", "q.jsonl"))
    assert with_bom[0]["prompt_ids"] == without[0]["prompt_ids"] == [104, 105]
    assert with_bom[0]["token_ids"] == without[0]["token_ids"]


def test_a_diffusion_checkpoint_decoded_autoregressively_gets_a_note(fsc_main, tmp_path):
    save_checkpoint(build_model(load_recipe("tiny_attn"), seed=1), tmp_path / "ckpt",
                    training={"data": "copy", "objective": "frontier", "steps": 1,
                              "seq_len": 32, "final_loss": 1.0})  # (the record the note reads)
    res = fsc_main("decode", "ckpt", "--prompt", "hi", "--length", "4", "--mode", "ar",
                   "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["stats"]["seed"] == 0
    assert "was trained by block diffusion at G 4; decoding it autoregressively" in res.stderr


def test_a_json_file_holds_an_array_of_prompts(fsc_main, tmp_path):
    """A .json file: an array of strings or objects (their fields carried, as a JSONL line's),
    or JSON lines; each decodes as the same prompt of a text file (it was read as text lines,
    a whole line of JSON for the prompt)."""
    (tmp_path / "p.txt").write_text("The king\nGood night\n")
    (tmp_path / "a.json").write_text(json.dumps(["The king", {"prompt": "Good night", "id": 7}],
                                                indent=2))
    (tmp_path / "lines.json").write_text('{"prompt": "The king"}\n{"prompt": "Good night"}\n')
    run = ["decode", "tiny_attn", "--length", "8", "--prompts"]
    want = [r["token_ids"] for r in _lines(fsc_main(*run, "p.txt"))]
    for name in ("a.json", "lines.json"):
        rows = _lines(fsc_main(*run, name))
        assert [r["token_ids"] for r in rows] == want
        assert [r["prompt"] for r in rows] == ["The king", "Good night"]
    assert _lines(fsc_main(*run, "a.json"))[1]["id"] == 7
    (tmp_path / "one.json").write_text('{"prompt": "a\u2028b"}\n')  # one line (U+2028 ends none)
    assert [r["prompt"] for r in _lines(fsc_main(*run, "one.json"))] == ["a\u2028b"]


@pytest.mark.parametrize("text, says", [
    ('{\n  "prompt": "a"\n}\n', "--prompts p.json: a .json file holds an array of prompts"),
    ("[]", "--prompts p.json: holds no prompt (an empty array)"),
    ('["a", 7]', '--prompts p.json: item 2 is neither a string nor an object with a string '
                 '"prompt" field'),
    ('["a", {"text": "b"}]', '--prompts p.json: item 2 is not an object with a string '
                             '"prompt" field'),
    ('["a", {"prompt": "b", "text": "c"}]', '--prompts p.json: item 2: field "text" is one'),
])
def test_a_json_file_that_is_no_array_of_prompts_is_one_line(fsc_main, tmp_path, no_weights,
                                                             text, says):
    (tmp_path / "p.json").write_text(text)
    _refused(fsc_main("decode", "tiny_attn", "--prompts", "p.json"), says)


def test_prompts_of_different_lengths_count_the_caches_each_is_folded_in(fsc_main, tmp_path,
                                                                        monkeypatch):
    """Each prompt of a mixed batch is folded alone, its cache held until they are merged; a
    batch of one length is folded in one pass, which holds more: under memory where two
    400-token prompts just fit, a 400- and a 300-token one fit too (the check counted the
    mixed pair as if folded together, and refused it), and a third 400-token one at --batch 3
    does not, refused before any weight."""
    from fsc import loading

    recipe = load_recipe("tiny_attn")
    fits = loading.decode_bytes(recipe, 400, 8, 4, B=2)[0]
    monkeypatch.setattr(loading, "free_bytes", lambda device: fits)
    (tmp_path / "same.txt").write_text("a" * 400 + "\n" + "b" * 400 + "\n")
    (tmp_path / "mixed.txt").write_text("a" * 400 + "\n" + "b" * 300 + "\n")
    run = ["decode", "tiny_attn", "--length", "8", "--batch", "2", "--prompts"]
    assert len(_lines(fsc_main(*run, "same.txt"))) == 2
    assert len(_lines(fsc_main(*run, "mixed.txt"))) == 2
    (tmp_path / "three.txt").write_text(("a" * 400 + "\n") * 3)
    res = fsc_main(*run[:5], "3", "--prompts", "three.txt")
    assert res.returncode == 2 and "the longest prompt's 400 tokens at --batch 3" in res.stderr
    # a sliding window decodes a batch per prompt length: nothing is folded alone
    swa = load_recipe("passkey_hybrid_swa")
    monkeypatch.setattr(loading, "free_bytes",
                        lambda device: loading.decode_bytes(swa, 400, 8, 4, B=2)[0])
    assert len(_lines(fsc_main("decode", "passkey_hybrid_swa", *run[2:], "mixed.txt"))) == 2


def test_prompt_text_the_tokenizer_drops_is_said(fsc_main, tmp_path):
    """A tokenizer without a character (and no unknown token) drops it from the prompt: "café"
    was decoded as "caf" with nothing said, where genppl counts such text."""
    from tokenizers import Tokenizer, decoders, models

    chars = [chr(c) for c in range(32, 127)]
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(chars)}, merges=[]))
    tok.decoder = decoders.Fuse()
    (tmp_path / "tok").mkdir()
    tok.save(str(tmp_path / "tok" / "tokenizer.json"))
    recipe = load_recipe("tiny_attn").model_copy(update={"vocab_size": len(chars),
                                                         "block_size": 1})
    save_checkpoint(build_model(recipe, seed=0), tmp_path / "ck",
                    include=(tmp_path / "tok" / "tokenizer.json",))
    run = ("decode", "ck", "--mode", "ar", "--length", "4", "--json")
    res = fsc_main(*run, "--prompt", "café")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["prompt_ids"] == [chars.index(c) for c in "caf"]
    assert ("note: --prompt holds text the tokenizer (ck) does not carry (a character it lacks "
            "is dropped): it reads back as 'caf'") in " ".join(res.stderr.split())
    (tmp_path / "p.txt").write_text("café\nok\nnaïve\n")
    res = fsc_main(*run[:-1], "--prompts", "p.txt")
    assert res.returncode == 0 and "(and 1 other prompt) holds text" in res.stderr, res.stderr
    assert "note:" not in fsc_main(*run, "--prompt", "cafe").stderr


class _Stdin(io.TextIOWrapper):
    """Standard input holding `data`, a pipe's or a terminal's."""

    def __init__(self, data: bytes, tty: bool = False):
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("suffix, data", [
    (".txt", "Once upon\n\nhi\n"),
    (".jsonl", '{"id": 1, "prompt": "Once upon"}\n{"id": 2, "prompt": "hi"}\n'),
    (".json", '  ["Once upon", {"prompt": "hi", "id": 2}]'),
])
def test_prompts_dash_reads_standard_input_as_the_file_it_begins_like(fsc_main, tmp_path,
                                                                      monkeypatch, suffix, data):
    """`--prompts -`: piped prompts, as jq -c or cat writes them, read as the file of that
    suffix is (JSON where they begin with { or [)."""
    (tmp_path / f"p{suffix}").write_text(data)
    run = ("decode", "tiny_attn", "--length", "4", "--temperature", "1")
    from_file = _lines(fsc_main(*run, "--prompts", f"p{suffix}"))
    monkeypatch.setattr(sys, "stdin", _Stdin(data.encode()))
    piped = _lines(fsc_main(*run, "--prompts", "-"))
    assert len(piped) == 2 and [r["prompt"] for r in piped] == ["Once upon", "hi"]
    for row in (*piped, *from_file):
        row["stats"] = {k: row["stats"][k] for k in ("seed", "row", "line")}
    assert piped == from_file


def test_prompt_file_dash_is_standard_input_as_a_file_is(fsc_main, tmp_path, monkeypatch):
    run = ("decode", "tiny_attn", "--length", "4", "--json")
    alone = json.loads(fsc_main(*run, "--prompt", "Once upon", check=0).stdout)
    monkeypatch.setattr(sys, "stdin", _Stdin("\ufeffOnce upon\r\n".encode()))
    piped = json.loads(fsc_main(*run, "--prompt-file", "-", check=0).stdout)
    assert piped["prompt"] == "Once upon" and piped["token_ids"] == alone["token_ids"]


@pytest.mark.parametrize("option", ["--prompts", "--prompt-file"])
def test_standard_input_that_is_a_terminal_or_empty_is_refused(fsc_main, monkeypatch, option):
    """A terminal is refused, not waited on: a prompt typed there would be read for a file."""
    monkeypatch.setattr(sys, "stdin", _Stdin(b"hi\n", tty=True))
    _refused(fsc_main("decode", "tiny_attn", option, "-"),
             f"error: {option} -: reads standard input, a terminal here; pipe the text in "
             f"({option} - < FILE")
    monkeypatch.setattr(sys, "stdin", _Stdin(b""))
    _refused(fsc_main("decode", "tiny_attn", option, "-"), f"error: {option} -: is empty")


@pytest.mark.slow
def test_a_real_pipe_feeds_prompts_dash(tmp_path):
    res = subprocess.run([sys.executable, "-m", "fsc", "decode", "tiny_attn", "--length", "4",
                          "--prompts", "-"], input=b'{"prompt": "hi"}\n', cwd=tmp_path,
                         capture_output=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["prompt_ids"] == [104, 105]
