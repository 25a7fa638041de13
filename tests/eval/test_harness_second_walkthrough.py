"""What a second first-use pass of `fsc eval --task harness`, `python -m fsc.harness` and the
model `fsc` met: requests that cannot fit max_length refused before the model is asked,
contexts cut to fit said, an empty continuation of a diffusion model scored, the EOS token's
text a stop sequence as under the hf model, model_args and options that were read as something
else (or not at all) refused, and the K a diffusion model generates with shown."""

import json
import sys
from argparse import Namespace

import pytest

pytest.importorskip("lm_eval")


def _one_line(res) -> str:
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return " ".join(lines[0].split())


def _requests(kind: str, *args):
    from lm_eval.api.instance import Instance

    return [Instance(kind, {}, a, i) for i, a in enumerate(args)]


@pytest.fixture
def tasks(tmp_path):
    from harness_tasks import write_tasks

    return write_tasks(tmp_path / "tasks")


def test_an_empty_continuation_of_a_diffusion_model_scores_zero(ar_recipe):
    """A continuation a tokenizer leaves empty (a context not ending on a block): the bound
    drew from U{1..0} and failed (RuntimeError, a harness run failed); it is 0 and greedy, as
    at G = 1."""
    from fsc.harness.lm import FscLM

    reqs = _requests("loglikelihood", ("abc", ""), ("To be", " or"))
    diffusion = FscLM("tiny_hybrid", mc_samples=2).loglikelihood(reqs)
    assert diffusion[0] == (0.0, True) and diffusion[1][0] < 0
    assert FscLM(str(ar_recipe)).loglikelihood(reqs)[0] == (0.0, True)


@pytest.mark.parametrize("source", ["AR", "tiny_hybrid"])
def test_a_continuation_longer_than_max_length_is_refused_before_the_model_is_asked(
        source, ar_recipe):
    """It failed inside the scorer (AR: a gather of 20 targets from 8 positions; diffusion: a
    negative start), a RuntimeError with the run left failed; the hf backend fails on it too.
    Now a UsageError naming the lengths and the option, before the model is asked."""
    from fsc.errors import UsageError
    from fsc.harness.lm import FscLM

    lm = (FscLM(str(ar_recipe), max_length=8) if source == "AR"
          else FscLM(source, max_length=8, mc_samples=2))
    with pytest.raises(UsageError, match="loglikelihood: a continuation of 20 tokens is longer "
                       r"than max_length 8; --max-length N \(model_args max_length=N\)"):
        lm.loglikelihood(_requests("loglikelihood", ("ab", "c" * 20)))
    assert not lm.asked
    assert lm.loglikelihood(_requests("loglikelihood", ("ab", "c" * 8)))[0][0] < 0  # (fits)


def test_max_gen_toks_not_below_max_length_is_refused(ar_recipe):
    """max_gen_toks 8 at max_length 8 kept one token of the context (max(1, 8 - 8)) and
    generated from it; the hf backend refuses it (no room for the context)."""
    from fsc.errors import UsageError
    from fsc.harness.lm import FscLM

    lm = FscLM(str(ar_recipe), max_length=8)
    with pytest.raises(UsageError, match="generate_until: max_gen_toks 8 leaves no room for the "
                       "context in max_length 8"):
        lm.generate_until(_requests("generate_until", ("To be", {"until": [], "max_gen_toks": 8})))
    assert not lm.asked
    [answer] = lm.generate_until(_requests("generate_until",
                                           ("To be", {"until": [], "max_gen_toks": 7})))
    assert isinstance(answer, str)


def test_the_eos_tokens_text_is_a_stop_sequence(ar_recipe, tmp_path, monkeypatch):
    """The hf backend adds the EOS token's text to a request's stop sequences: an answer that
    spells `</s>` out of other tokens ends there. fsc cut only at the EOS id."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    import fsc.harness.lm
    from fsc.checkpoint.layout import read_checksums, write_checksums
    from fsc.cli.main import main
    from fsc.decode import DecodeResult
    from fsc.harness.lm import FscLM

    ckpt = tmp_path / "ckpt"
    assert main(["build", str(ar_recipe), "--save", str(ckpt), "--store",
                 str(tmp_path / "st")]) == 0
    # printable ASCII, decoded without spaces between tokens; the special `</s>` at 127
    tok = Tokenizer(models.BPE(vocab={chr(i): i for i in range(32, 127)}, merges=[]))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken("</s>", special=True)])
    tok.save(str(ckpt / "tokenizer.json"))
    write_checksums(ckpt, [*read_checksums(ckpt), "tokenizer.json"])  # as a save lists it
    spelled = [ord(c) for c in "ab</s>cd"]  # `</s>` in four characters, not the EOS id

    def made(model, tok, prompts, *args, **kw):
        return [DecodeResult(list(spelled)) for _ in prompts]

    monkeypatch.setattr(fsc.harness.lm, "generate_batch", made)
    lm = FscLM(str(ckpt))
    assert lm.generate_until(_requests("generate_until",
                                       ("Say", {"until": ["\n"], "max_gen_toks": 8}),
                                       ("Say", {"until": "d", "max_gen_toks": 8}))) == ["ab", "ab"]


def test_a_model_arg_flag_that_is_not_one_is_refused(ar_recipe):
    """cached=maybe was read as false (the draws recomputing the context), without a word."""
    from fsc.errors import UsageError
    from fsc.harness.lm import checked_args

    with pytest.raises(UsageError, match="model_args cached=maybe: expected true or false"):
        checked_args(str(ar_recipe), cached="maybe")
    assert checked_args(str(ar_recipe), cached="False")["cached"] is False
    assert checked_args(str(ar_recipe), cached=True)["cached"] is True


def _harness_main(monkeypatch, capsys, *argv) -> tuple[int, str]:
    """`python -m fsc.harness ARGV` in this process: (exit status, stderr as one line)."""
    from fsc.harness.__main__ import main

    monkeypatch.setattr(sys, "argv", ["fsc.harness", *argv])
    code = main()
    return code, " ".join(capsys.readouterr().err.split())


def test_python_m_fsc_harness_refuses_a_chat_template_in_one_line(ar_recipe, monkeypatch,
                                                                  capsys):
    """--apply_chat_template ended in lm_eval's NotImplementedError traceback, after the half
    minute of indexing its tasks."""
    code, err = _harness_main(monkeypatch, capsys, "--model", "fsc", "--model_args",
                              f"pretrained={ar_recipe}", "--device", "cpu", "--tasks", "fsc_gen",
                              "--apply_chat_template")
    assert code == 2 and err == ("error: --apply_chat_template: the model fsc reads plain "
                                 "prompts; it applies no chat template"), err


def test_a_chat_template_asked_of_the_model_is_one_error(ar_recipe):
    """The harness asks the model itself for it (lm_eval's simple_evaluate, its own CLI after
    the checks): a UsageError, not lm_eval's NotImplementedError."""
    from fsc.errors import UsageError
    from fsc.harness.__main__ import check_model
    from fsc.harness.lm import FscLM

    with pytest.raises(UsageError, match="applies no chat template"):
        FscLM(str(ar_recipe)).apply_chat_template([{"role": "user", "content": "hi"}])
    check_model(Namespace(model="fsc", model_args={"pretrained": str(ar_recipe)},
                          batch_size=None, apply_chat_template=False))


@pytest.mark.parametrize(("options", "says"), [
    (["--executor", "ray"], "--executor ray: --task harness runs in this process, on one device "
                            "(--device); drop it"),
    (["--workers", "2"], "--workers 2: --task harness runs in this process"),
    (["--executor", "slurm", "--slurm-time", "5"], "--executor slurm, --slurm-time 5: --task "
                                                   "harness runs in this process"),
])
def test_executor_options_are_refused_not_ignored(options, says, fsc_main, ar_recipe, tasks,
                                                   tmp_path):
    """A harness run is one process: --executor ray (or slurm, --workers 4) ran it here,
    without a word."""
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "fsc_choice",
                   "--include-path", tasks, "--store", tmp_path / "st", *options, check=2)
    assert _one_line(res).startswith(f"error: {says}")
    assert not (tmp_path / "st").exists()


def test_mc_samples_on_an_autoregressive_checkpoint_is_refused(fsc_main, ar_recipe, tasks,
                                                               tmp_path):
    """Its likelihoods are exact: --mc-samples was ignored (as --steps is refused there)."""
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "fsc_choice",
                   "--include-path", tasks, "--mc-samples", "64", "--store", tmp_path / "st",
                   check=2)
    assert _one_line(res) == (f"error: --mc-samples 64: {ar_recipe} is autoregressive (G 1): "
                              "its likelihoods are exact, drawn by no Monte Carlo")
    assert not (tmp_path / "st").exists()


@pytest.mark.slow  # two harness runs, seconds
def test_contexts_cut_to_fit_max_length_are_said(fsc_main, ar_recipe, tasks, tmp_path):
    """RULER-style prompts longer than max_length (2048 by default for fsc's models) lost their
    start, needles included, without a word; the hf model warns. A rolling text's windows are
    cut by design: not said."""
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "fsc_gen,fsc_text",
                   "--include-path", tasks, "--max-length", "10", "--store", tmp_path / "st",
                   check=0)
    err = " ".join(res.stderr.split())
    assert ("note: generate_until: 2 of 2 contexts were cut from the left to max_length 10 less "
            "max_gen_toks 6; --max-length N (model_args max_length=N) reads more") in err
    assert "loglikelihood" not in err
    from harness_tasks import CHOICE

    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "fsc_choice",
                   "--include-path", tasks, "--max-length", "26", "--store", tmp_path / "st",
                   check=0)
    pairs = [d["question"] + c for d in CHOICE for c in d["choices"]]  # bytes, read but the last
    cut = sum(len(p) - 1 > 26 for p in pairs)
    assert 0 < cut < len(pairs)
    assert (f"note: loglikelihood: {cut} of {len(pairs)} contexts were cut from the left to "
            "max_length 26 tokens") in " ".join(res.stderr.split())


@pytest.mark.slow  # a harness run, seconds
def test_a_diffusion_models_header_names_the_k_it_generates_with(fsc_main, tasks, tmp_path):
    """--steps 2 gave no sign in the table that generation ran at K 2 (the header said
    `diffusion` alone)."""
    res = fsc_main("eval", "tiny_hybrid", "--task", "harness", "--tasks", "fsc_gen",
                   "--include-path", tasks, "--steps", "2", "--limit", "1", "--store",
                   tmp_path / "st", check=0)
    assert "lm-evaluation-harness" in res.stdout and ", diffusion G 4, K 2 (run" in res.stdout
    rows = json.loads(fsc_main("eval", "tiny_hybrid", "--task", "harness", "--tasks", "fsc_gen",
                               "--include-path", tasks, "--steps", "2", "--limit", "1",
                               "--store", tmp_path / "st", "--json", check=0).stdout)["rows"]
    assert {r["K"] for r in rows} == {2}
