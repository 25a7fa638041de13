"""A first use of `fsc decode`, option by option: an option that would change nothing where it
is given is refused on one line (exit 2, before any weight) or noted, never silently ignored;
--prompt-ids takes only ids its tokenizer has; the stats and the lines under the text say how
the tokens were drawn (greedy or the temperature, top-k, top-p, repetition penalty, seed) and
whether the decode stopped at its EOS short of --length."""

import json

import pytest

from fsc.checkpoint.io import save_checkpoint
from fsc.model.lm import build_model
from fsc.recipe import load_recipe

SAMPLING = ("temperature", "top_k", "top_p", "repetition_penalty")


def _refused(res, says: str) -> None:
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    assert res.stdout == ""


@pytest.mark.parametrize("cuts, says", [
    (["--top-k", "5"], "--top-k 5 at --temperature 0 changes nothing: greedy decoding takes "
                       "the most likely token; give --temperature T (e.g. 0.8) to sample, or "
                       "drop --top-k"),
    (["--top-p", "0.5", "--top-k", "3"], "--top-k 3 and --top-p 0.5 at --temperature 0 change "
                                         "nothing"),
])
def test_top_k_and_top_p_when_greedy_are_refused(fsc_main, no_weights, cuts, says):
    """Greedy decoding takes the most likely id: top-k and top-p cut nothing (the sampler
    applies them at a temperature only), so giving them without one is a mistake to say."""
    _refused(fsc_main("decode", "tiny_attn", "--prompt", "hi", *cuts), says)


def test_identity_cuts_when_greedy_are_accepted(fsc_main):
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--top-p", "1",
                   "--top-k", "0", check=0)
    assert "sampling: greedy" in res.stdout


def test_prefill_chunk_without_a_cache_is_refused(fsc_main, no_weights):
    _refused(fsc_main("decode", "tiny_attn", "--prompt", "hi", "--no-cache", "--prefill-chunk",
                      "8"), "--prefill-chunk 8 sets how the prompt is folded into the cache; "
                            "--no-cache folds none")


def test_the_order_and_threshold_at_one_step_are_noted(fsc_main):
    """At K 1 one step reveals the whole block: the policy's order and the threshold change
    nothing, and the decode says so (it is still the decode asked for)."""
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--steps", "1",
                   "--policy", "margin", "--threshold", "0.5", check=0)
    assert ("note: at K 1 one step reveals the whole block: --threshold 0.5 and --policy "
            "margin change nothing") in res.stderr
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--steps", "2",
                   "--policy", "margin", check=0)
    assert "note" not in res.stderr


@pytest.mark.parametrize("given, drop", [(["--steps", "2"], "drop --steps"),
                                         (["--G", "4", "--policy", "margin"],
                                          "drop --G and --policy")])
def test_mode_ar_names_the_options_given(fsc_main, no_weights, given, drop):
    """--mode ar with one denoising option names that one, not --G and --steps both."""
    _refused(fsc_main("decode", "tiny_attn", "--prompt", "hi", "--mode", "ar", *given),
             "--mode ar decodes with G 1 and no denoising steps, one token a pass, in order; "
             + drop)


def test_a_block_size_1_model_does_not_blame_a_mode_never_given(fsc_main, tmp_path):
    """A model of block size 1 decodes autoregressively by default: --threshold there is
    refused for that reason, without saying `--mode ar`, which the user never gave."""
    recipe = load_recipe("tiny_attn").as_autoregressive()
    save_checkpoint(build_model(recipe, seed=1), tmp_path / "g1")
    res = fsc_main("decode", tmp_path / "g1", "--prompt", "hi", "--threshold", "0.5")
    _refused(res, "--threshold 0.5: a model of block size 1 decodes autoregressively unless "
                  "told otherwise, one token a pass, in order; drop --threshold, or give --G N")
    assert "--mode ar" not in res.stderr
    # --G 1 there still decodes in blocks, as --help's --mode says
    res = fsc_main("decode", tmp_path / "g1", "--prompt", "hi", "--G", "1", "--length", "2",
                   "--json", check=0)
    assert json.loads(res.stdout)["stats"]["mode"] == "diffusion"
    said = " ".join(fsc_main("decode", "--help", check=0).stdout.split())
    assert "default: ar when the recipe's G is 1 and no --G is given" in said


@pytest.mark.parametrize("ids, says", [
    ("1,²", "--prompt-ids '1,²': expected comma-separated token ids"),  # int() refused it
    ("1,١", "--prompt-ids '1,١': expected comma-separated token ids"),  # int() read it as 1
    ("104,270", "--prompt-ids: token id 270 is outside the tokenizer's vocabulary 0..259 "
                "(bytes; the model's ids 260..287 are no tokens)"),
    # past the model's ids too: the narrower range is said (it was "0..287", refusing 270)
    ("1,2,300", "--prompt-ids: token id 300 is outside the tokenizer's vocabulary 0..259 "
                "(bytes; the model's ids 260..287 are no tokens)"),
])
def test_prompt_ids_are_ascii_ids_of_the_tokenizer(fsc_main, no_weights, ids, says):
    _refused(fsc_main("decode", "tiny_attn", "--prompt-ids", ids), says)


@pytest.mark.parametrize("more", [(), ("--no-cache",)])
def test_the_stats_say_how_the_tokens_were_drawn_and_why_it_stopped(fsc_main, more):
    sampled = ("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--temperature", "0.8",
               "--top-k", "5", "--top-p", "0.9", "--repetition-penalty", "1.1", "--json", *more)
    s = json.loads(fsc_main(*sampled, check=0).stdout)["stats"]
    assert {k: s[k] for k in SAMPLING} == {"temperature": 0.8, "top_k": 5, "top_p": 0.9,
                                           "repetition_penalty": 1.1}
    assert s["stopped"] == "length" and s["tokens"] == 4
    # these random weights generate their EOS after 39 tokens, short of --length
    eos = ("decode", "tiny_attn", "--prompt", "hi", "--length", "1k", "--mode", "ar", "--json")
    s = json.loads(fsc_main(*eos, *more, check=0).stdout)["stats"]
    assert s["stopped"] == "eos" and s["tokens"] < 1024
    assert {k: s[k] for k in SAMPLING} == {"temperature": 0.0, "top_k": 0, "top_p": 1.0,
                                           "repetition_penalty": 1.0}


def test_the_lines_under_the_text_say_the_sampling_and_the_stop(fsc_main):
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--temperature",
                   "0.8", "--top-k", "5", "--top-p", "0.9", "--repetition-penalty", "1.1",
                   "--seed", "3", check=0)
    assert ("sampling: temperature 0.8, top-k 5, top-p 0.9, repetition penalty 1.1, seed 3"
            in " ".join(res.stdout.split()))
    assert "stopped at EOS" not in res.stdout
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "1k", "--mode", "ar",
                   check=0)
    assert "sampling: greedy\n" in res.stdout
    said = " ".join(res.stdout.split())  # (the console wraps the line)
    assert "forward passes (ar, G 1, cached, cpu); stopped at EOS" in said
    # greedy, the random order still reads the seed
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--length", "4", "--policy",
                   "random", "--seed", "2", check=0)
    assert "sampling: greedy, seed 2\n" in res.stdout


def test_the_prompts_summary_says_the_sampling_and_the_stops(fsc_main, tmp_path):
    (tmp_path / "p.txt").write_text("hello\nworld\n")
    res = fsc_main("decode", "tiny_attn", "--prompts", "p.txt", "--length", "1k", "--mode",
                   "ar", "--temperature", "0.5", "--seed", "4", check=0)
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    ended = sum(r["stats"]["stopped"] == "eos" for r in rows)
    assert ended and all(r["stats"]["temperature"] == 0.5 for r in rows)
    said = " ".join(res.stderr.split())
    assert "; sampling: temperature 0.5, seeds derived from --seed 4" in said
    assert f"; {ended} of 2 prompts stopped at EOS" in said


@pytest.fixture
def bosless(tmp_path):
    """A tokenizer folder with a mask token and no BOS."""
    from tokenizers import Tokenizer, models

    folder = tmp_path / "tok"
    folder.mkdir()
    vocab = {chr(i): i for i in range(32, 127)} | {"[UNK]": 127, "<mask>": 128}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]"))
    tok.add_special_tokens(["<mask>"])
    tok.save(str(folder / "tokenizer.json"))
    return folder


@pytest.mark.parametrize("given, says", [
    ([], "no prompt given, and tok has no BOS to begin an empty one: give --prompt TEXT, "
         "--prompt-file FILE or --prompt-ids IDS"),
    (["--prompt", ""], "--prompt is empty and tok has no BOS to begin it"),
])
def test_no_prompt_without_a_bos_is_refused_before_the_weights(fsc_main, no_weights, bosless,
                                                                given, says):
    _refused(fsc_main("decode", "tiny_attn", "--tokenizer", bosless.name, *given), says)


def test_a_temperature_too_small_to_divide_by_is_refused(fsc_main, no_weights):
    """1e-320 divided into the logits overflows to inf and the draw met NaN (an internal
    error, exit 1)."""
    _refused(fsc_main("decode", "tiny_attn", "--prompt", "hi", "--temperature", "1e-320"),
             "--temperature 1e-320: give 0 (greedy) or at least 1e-05; the logits divided by a "
             "smaller one leave the range of a float")


@pytest.mark.parametrize("text", ["1,²", "1,١", "٣"])
def test_ids_are_ascii_digits_for_every_command(text):
    """fsc.blocks.parse_ids (decode's and verify's --prompt-ids): '²' passed str.isdigit and
    crashed int() (an internal error), '١' was read as 1."""
    from fsc.blocks import parse_ids
    from fsc.errors import UsageError

    with pytest.raises(UsageError, match="expected comma-separated token ids"):
        parse_ids(text, 300, "--prompt-ids")


def test_a_tokenizer_option_that_is_wrong_is_named(fsc_main, tmp_path):
    """`--tokenizer DIR` errors began with the path alone; a missing one said "no
    tokenizer.json found"."""
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--tokenizer", tmp_path, check=2)
    assert res.stderr.startswith(f"error: --tokenizer {tmp_path}: no tokenizer.json found")
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--tokenizer", tmp_path / "nope",
                   check=2)
    assert res.stderr.startswith(f"error: --tokenizer {tmp_path / 'nope'}: no such file or "
                                 "directory")


def test_a_tokenizer_larger_than_the_model_is_refused_before_the_weights(fsc_main, tmp_path,
                                                                         monkeypatch):
    from tokenizers import Tokenizer, models

    import fsc.loading

    vocab = {chr(i): i for i in range(32, 127)} | {f"t{i}": 127 + i for i in range(400)}
    Tokenizer(models.BPE(vocab=vocab | {"<mask>": 600}, merges=[])).save(
        str(tmp_path / "tokenizer.json"))

    def never(*a, **k):
        raise AssertionError("weights loaded")

    monkeypatch.setattr(fsc.loading, "load_model", never)
    res = fsc_main("decode", "tiny_attn", "--prompt", "hi", "--tokenizer", tmp_path, check=2)
    assert res.stderr == (f"error: the tokenizer ({tmp_path}) has 601 tokens but tiny_attn's "
                          "vocab_size is 288\n")


def test_a_prompts_row_of_no_tokens_is_said_so(fsc_main, tmp_path):
    """A --prompts row whose text encodes to nothing (spaces, under a tokenizer that drops
    them) was said to be empty."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = Tokenizer(models.WordLevel({"hi": 0, "x": 1, "<mask>": 2}, "x"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "p.jsonl").write_text('{"prompt": "hi"}\n{"prompt": "   "}\n')
    res = fsc_main("decode", "tiny_attn", "--prompts", tmp_path / "p.jsonl", "--tokenizer",
                   tmp_path, check=2)
    assert "line 2's prompt encodes to no tokens and" in res.stderr, res.stderr


def test_an_option_given_twice_is_quoted_as_click_reads_it_and_an_out_file_is_a_file(
        fsc_main, tmp_path):
    """`--batch 2 --batch 0`: click takes the last value, and the message quoted the first;
    `--out FILE` said the file 'already exists and is not an empty directory'."""
    res = fsc_main("decode", "tiny_attn", "--prompts", tmp_path / "p.txt", "--batch", "2",
                   "--batch", "0", check=2)
    assert "'--batch': 0 must be between 1" in res.stderr, res.stderr
    (tmp_path / "afile").write_text("x")
    res = fsc_main("train", "tiny_attn", "--data", "copy", "--seq-len", "16", "--train-steps",
                   "1", "--out", tmp_path / "afile", "--store", tmp_path / "st", check=2)
    assert res.stderr == f"error: --out {tmp_path / 'afile'}: a file, not a directory\n"
