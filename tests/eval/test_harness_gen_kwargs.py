"""A generate_until task's generation_kwargs as the hf model's transformers reads them: what
fsc's decoder applies (top_k, top_p, min_p, repetition_penalty) is applied, what it does not
apply where transformers would (typical_p, no_repeat_ngram_size, min_new_tokens, beams, ...)
and what transformers refuses (top_p 0, do_sample 'false') are one line naming the argument
and the task, exit 2, before the weights load under `fsc eval --task harness` and nothing
stored; model_args are named as the user wrote them."""

import json

import pytest

pytest.importorskip("lm_eval")

from harness_tasks import YAML, write_tasks

# fsc_gen with a line more in its generation_kwargs ({extra})
GEN = YAML["fsc_gen"].replace("task: fsc_gen", "task: fsc_odd").replace(
    "  max_gen_toks: 6\n", "  max_gen_toks: 6\n  {extra}\n")


def _line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return " ".join(lines[0].split())


def _requests(*kwargs, task: str | None = "my_gen"):
    from lm_eval.api.instance import Instance

    return [Instance("generate_until", {}, ("To be", {"until": [], "max_gen_toks": 3, **k}), i,
                     (task, i, 1)) for i, k in enumerate(kwargs)]


@pytest.fixture
def tasks(tmp_path):
    """write_tasks(folder, extra): the local tasks, and fsc_odd, a generation task whose
    generation_kwargs add `extra` (YAML lines)."""

    def write(folder, extra: str):
        write_tasks(folder)
        (folder / "fsc_odd.yaml").write_text(GEN.format(data=folder / "fsc_gen.jsonl",
                                                        extra=extra.replace("\n", "\n  ")))
        return folder

    return write


@pytest.fixture
def ar_lm(ar_recipe):
    from fsc.harness.lm import FscLM

    return FscLM(str(ar_recipe))


SAMPLED = "do_sample: true\ntemperature: 1.0\n"


@pytest.mark.parametrize(("extra", "says"), [
    (SAMPLED + "typical_p: 0.9", "typical_p 0.9"),
    ("no_repeat_ngram_size: 3", "no_repeat_ngram_size 3"),
    ("min_new_tokens: 4", "min_new_tokens 4"),
    ("num_beams: 4", "num_beams 4"),
    ("top_p: 0\n" + SAMPLED, "top_p 0: expected a number in (0, 1]"),
], ids=["typical_p", "no_repeat_ngram_size", "min_new_tokens", "num_beams", "top_p-0"])
def test_a_task_asking_for_what_fsc_cannot_apply_is_refused_before_the_weights_load(
        fsc_main, ar_recipe, tasks, tmp_path, monkeypatch, extra, says):
    """They were not applied (a note on stderr, or none) and the answers parted from the hf
    model's; now one line naming the argument and the task, before the weights load (a
    likelihood task before it notwithstanding), exit 2, no run."""
    import fsc.harness.lm

    def no_weights(*a, **k):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr(fsc.harness.lm, "load_model", no_weights)
    folder = tasks(tmp_path / "tasks", extra)
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "fsc_choice,fsc_odd",
                   "--include-path", folder, "--store", tmp_path / "st")
    assert res.returncode == 2, res.stderr
    assert _line(res.stderr).startswith(f"error: generate_until: task fsc_odd asks for {says}")
    runs = fsc_main("runs", "--store", tmp_path / "st", "--json", check=0)
    assert json.loads(runs.stdout) == []


def test_what_transformers_would_apply_and_fsc_does_not_is_refused_naming_the_task(ar_lm):
    """A request's own argument fsc's decoder does not apply is refused, naming it and the task,
    before the model is asked (it was said in a note, or not at all, and the answer differed
    from the hf model's)."""
    from fsc.errors import UsageError

    for kwargs, says in (({"no_repeat_ngram_size": 2}, "no_repeat_ngram_size 2"),
                         ({"min_new_tokens": 3}, "min_new_tokens 3"),
                         ({"do_sample": True, "temperature": 0.7, "typical_p": 0.5},
                          "typical_p 0.5"),
                         ({"num_beams": 3}, "num_beams 3"),
                         ({"eos_token_id": 5}, "eos_token_id 5"),
                         ({"top_kk": 5}, "top_kk 5")):
        with pytest.raises(UsageError, match=rf"^generate_until: task my_gen asks for {says}, "
                           "which fsc's decoder does not apply .*drop it from the task's "
                           "generation_kwargs$"):
            ar_lm.generate_until(_requests(kwargs))
        assert not ar_lm.asked


def test_what_changes_no_answer_or_is_applied_passes(ar_lm):
    """top_k, top_p, min_p and repetition_penalty are applied; typical_p on a greedy request,
    one beam and the outputs' form change no answer of transformers' generate, which reads the
    sampling arguments (even top_p 0) only where do_sample is true: none refused."""
    answers = ar_lm.generate_until(_requests(
        {"do_sample": True, "temperature": 0.7, "top_k": 5, "top_p": 0.9, "min_p": 0.1,
         "repetition_penalty": 1.2},
        {"typical_p": 0.5, "num_beams": 1, "use_cache": True, "output_scores": False,
         "length_penalty": 1.0, "no_repeat_ngram_size": 0, "min_new_tokens": 0},
        {"do_sample": False, "temperature": -1, "top_p": 0, "top_k": -1}))
    assert len(answers) == 3 and all(isinstance(a, str) for a in answers)


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"do_sample": True, "temperature": 1.0, "top_p": 0}, "top_p 0: expected a number in (0, 1]"),
    ({"do_sample": True, "temperature": 1.0, "top_k": -1}, "top_k -1: expected an integer"),
    ({"do_sample": True, "temperature": 1.0, "top_k": "abc"}, "top_k 'abc': expected an integer"),
    ({"do_sample": "false", "temperature": 1.0}, "do_sample 'false': expected true or false"),
    ({"do_sample": True, "temperature": -1}, "temperature -1: expected a number of at least 0"),
    ({"repetition_penalty": 0}, "repetition_penalty 0: expected a number above 0"),
    ({"max_gen_toks": 0}, "max_gen_toks 0: expected an integer of at least 1"),
    ({"max_gen_toks": "x"}, "a max_gen_toks or temperature that is no number"),
    ({"until": ["\n", 5]}, "until 5: expected stop sequences, each a text that is not empty"),
    ({"until": 7}, "until 7: expected stop sequences"),
    ({"until": ["Q:", ""]}, "until '': expected stop sequences"),
], ids=["top_p-0", "top_k-negative", "top_k-text", "do_sample-text", "temperature-negative",
        "penalty-0", "max_gen_toks-0", "max_gen_toks-text", "until-number", "until-not-a-list",
        "until-empty"])
def test_a_value_transformers_refuses_is_one_line_naming_the_task(ar_lm, kwargs, says):
    """They failed in the decoder's own check ("top_p 0.0 must be in (0, 1]", naming neither
    the task nor where the value came from) once the model counted as asked, with a raw
    ValueError, or (do_sample 'false', a negative temperature) decoded something else. A stop
    sequence that is not text (the hf model fails on it) or is empty (the hf model stops after
    one token) was dropped: the answer ran on."""
    from fsc.errors import UsageError

    with pytest.raises(UsageError) as e:
        ar_lm.generate_until(_requests(kwargs))
    assert str(e.value).startswith(f"generate_until: task my_gen asks for {says}"), str(e.value)
    assert not ar_lm.asked


def test_max_gen_toks_past_max_length_is_refused_before_a_likelihood_task_runs(
        fsc_main, ar_recipe, tasks, tmp_path):
    """A likelihood task first, then one whose max_gen_toks does not fit max_length: the
    refusal came once the likelihoods were scored, and the run stayed, failed; now it comes
    before the weights load, and no run stays."""
    folder = tasks(tmp_path / "tasks", "do_sample: false")
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "fsc_choice,fsc_odd",
                   "--include-path", folder, "--max-length", "6", "--store", tmp_path / "st")
    assert res.returncode == 2
    assert _line(res.stderr) == ("error: generate_until: max_gen_toks 6 leaves no room for the "
                                 "context in max_length 6; --max-length N (model_args "
                                 "max_length=N) reads more")
    runs = fsc_main("runs", "--store", tmp_path / "st", "--json", check=0)
    assert json.loads(runs.stdout) == []


@pytest.mark.parametrize(("source", "steps", "says"), [
    ("tiny_hybrid", "9", "error: model_args steps=9 must be between 1 and G = 4"),
    ("AR", "2", "error: model_args steps=2: {ar} is autoregressive (G 1)"),
], ids=["above-G", "on-ar"])
def test_model_args_steps_is_named_as_written(harness_cli, ar_recipe, tmp_path, source, steps,
                                              says):
    """`model_args steps=9` was said to be `--steps 9`, an option of another command."""
    source = str(ar_recipe) if source == "AR" else source
    code, _, err = harness_cli("--model", "fsc", "--model_args", f"pretrained={source},steps={steps}",
                            "--tasks", "fsc_gen", "--include_path", write_tasks(tmp_path / "t"),
                            "--device", "cpu")
    assert code == 2 and _line(err).startswith(says.format(ar=ar_recipe)), err


def test_gen_kwargs_fsc_cannot_apply_are_refused_before_the_tasks_are_indexed(
        harness_cli, ar_recipe, tmp_path, monkeypatch):
    """`python -m fsc.harness --gen_kwargs typical_p=0.9`: refused (a sampling argument named
    is meant to apply), before the harness indexes its tasks."""
    import lm_eval.tasks

    def no_index(*a, **k):
        raise AssertionError("the tasks were indexed")

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", no_index)
    code, _, err = harness_cli("--model", "fsc", "--model_args", f"pretrained={ar_recipe}",
                            "--tasks", "fsc_gen", "--device", "cpu",
                            "--gen_kwargs", "typical_p=0.9")
    assert code == 2 and _line(err).startswith(
        "error: generate_until: --gen_kwargs asks for typical_p 0.9, which fsc's decoder does "
        "not apply"), err
    assert _line(err).endswith("drop it from --gen_kwargs")
