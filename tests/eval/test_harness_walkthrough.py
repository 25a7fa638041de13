"""What a first user of the model `fsc` in lm-evaluation-harness met: generation's arguments
read as the harness's hf backend reads them, sampled answers drawn apart, a published model's
own max_length, and a harness that is not installed said in one line."""

import json
import sys
from pathlib import Path

import pytest

from fsc.errors import UsageError

pytest.importorskip("lm_eval")


def _gen(lm, *asks):
    """lm's generate_until answers of (context, generation kwargs) pairs."""
    from lm_eval.api.instance import Instance

    return lm.generate_until([Instance("generate_until", {}, a, i) for i, a in enumerate(asks)])


@pytest.fixture
def ar_lm(ar_recipe):
    from fsc.harness.lm import FscLM

    return lambda **kw: FscLM(str(ar_recipe), **kw)


def test_generation_arguments_are_read_as_the_hf_backend_reads_them(ar_lm):
    """max_new_tokens is max_gen_toks (it was ignored: 256 tokens); a temperature alone samples
    (it decoded greedily); top_p is applied (it was ignored)."""
    lm = ar_lm(batch_size=4)
    contexts = ["To be", "Good night", "The king", "All the"]
    alias = _gen(lm, *[(c, {"until": [], "max_new_tokens": 3}) for c in contexts])
    assert alias == _gen(lm, *[(c, {"until": [], "max_gen_toks": 3}) for c in contexts])
    sampled = {"until": [], "max_gen_toks": 8, "do_sample": True, "temperature": 1.0}
    greedy = _gen(lm, *[(c, {"until": [], "max_gen_toks": 8}) for c in contexts])
    hot = _gen(lm, *[(c, sampled) for c in contexts])
    assert hot != greedy
    assert _gen(lm, *[(c, {"until": [], "max_gen_toks": 8, "temperature": 1.0})
                      for c in contexts]) == hot
    assert _gen(lm, *[(c, {**sampled, "top_p": 1e-9}) for c in contexts]) == greedy
    assert _gen(lm, *[(c, {**sampled, "top_k": 1}) for c in contexts]) == greedy  # was ignored


def test_repeated_sampled_requests_draw_apart_whatever_the_batch(ar_lm):
    """A task's repeats (the same request asked N times, for maj@N or pass@N) drew the same
    answer N times; each now draws its own, and the same at any batch size."""
    ask = ("To be", {"until": [], "max_gen_toks": 8, "do_sample": True, "temperature": 1.0})
    four = _gen(ar_lm(batch_size=4), *[ask] * 4)
    assert len(set(four)) > 1
    assert _gen(ar_lm(batch_size=1), *[ask] * 4) == four
    other = ("Good night", ask[1])
    assert _gen(ar_lm(batch_size=3), other, ask, ask)[1:] == four[:2]


def test_a_missing_harness_is_one_line(fsc_main, ar_recipe, monkeypatch, tmp_path):
    """lm-eval not installed: `fsc eval --task harness` said 'internal error', exit 1."""
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    for name in ("fsc.harness.run", "fsc.harness.lm"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    res = fsc_main("eval", ar_recipe, "--task", "harness", "--tasks", "arc_easy", "--store",
                   tmp_path / "st", check=2)
    [line] = res.stderr.splitlines()
    assert line.startswith("error: --task harness needs lm-evaluation-harness (")
    assert line.endswith("pip install 'fsc[harness]'") and not (tmp_path / "st").exists()


@pytest.mark.slow  # transformers builds the model and the harness's hf backend reads it
def test_a_published_models_max_length_is_the_hf_backends(tmp_path, fsc_main):
    """A published Llama whose config says 24 positions: without max_length in model_args, fsc
    cut requests at 2048 where the hf backend cuts them at 24 (rolling texts read in one window,
    long requests whole). Now both read 24, and score and answer alike."""
    pytest.importorskip("transformers")
    from harness_tasks import CHOICE, TEXT
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model

    from fsc.harness.lm import FscLM
    from tests.imports.published import save_bpe_tokenizer, save_published

    folder = save_published("llama", tmp_path / "tl", seed=3, vocab_size=320, bos_token_id=1,
                            eos_token_id=2, max_position_embeddings=24)
    save_bpe_tokenizer(folder)
    fsc_main("import", folder, "--out", tmp_path / "ck", "--store", tmp_path / "st", check=0)
    hf = get_model("hf")(pretrained=str(folder), device="cpu", batch_size=2, dtype="float32")
    ours = FscLM(str(tmp_path / "ck"), batch_size=2)
    assert ours.max_length == hf.max_length == 24
    pairs = [(d["question"] * 3, c) for d in CHOICE for c in d["choices"]]
    ll = [Instance("loglikelihood", {}, p, i) for i, p in enumerate(pairs)]
    for (a, ga), (b, gb) in zip(hf.loglikelihood(ll), ours.loglikelihood(ll), strict=True):
        assert b == pytest.approx(a, rel=1e-4) and ga == gb
    rolling = [Instance("loglikelihood_rolling", {}, (d["text"] * 2,), i)
               for i, d in enumerate(TEXT)]
    for a, b in zip(hf.loglikelihood_rolling(rolling), ours.loglikelihood_rolling(rolling),
                    strict=True):
        assert b == pytest.approx(a, rel=1e-4)
    gen = [Instance("generate_until", {}, (d["question"] * 4, {"until": ["\n"],
                                                               "max_new_tokens": 4}), i)
           for i, d in enumerate(CHOICE)]
    assert ours.generate_until(gen) == hf.generate_until(gen)
    # the command line reads the same length, and records it in the harness's results
    import lm_eval
    from harness_tasks import write_tasks
    from lm_eval.tasks import TaskManager

    tasks = write_tasks(tmp_path / "tasks")
    manager = TaskManager(include_path=str(tasks), include_defaults=False)
    want = lm_eval.simple_evaluate(model=hf, tasks=["fsc_text"], bootstrap_iters=0,
                                   task_manager=manager)
    res = fsc_main("eval", tmp_path / "ck", "--task", "harness", "--tasks", "fsc_text",
                   "--include-path", tasks, "--output-path", tmp_path / "out", "--store",
                   tmp_path / "st", "--json")
    doc = json.loads(res.stdout)
    for row in doc["rows"]:
        assert row["value"] == pytest.approx(
            want["results"]["fsc_text"][f"{row['metric']},none"], rel=1e-4), row
    [results] = [f for f in doc["files"] if "results_" in f]
    assert json.loads(Path(results).read_text())["config"]["model_args"]["max_length"] == 24
    from fsc.store import Store  # and the store says which length gave its numbers

    _, [(config,)] = Store(tmp_path / "st").query("select config from runs where kind = 'eval'")
    assert json.loads(config)["request"]["max_length"] == 24


@pytest.mark.slow  # an import and a build, seconds
def test_an_imported_checkpoint_keeps_its_length_without_the_published_folder(tmp_path,
                                                                             fsc_main):
    """`fsc import` records the published model's own length in the checkpoint, so a copy
    pulled elsewhere (the folder it came from gone) is cut where transformers cuts it; a
    checkpoint of fsc's own (here `fsc build --save`'s) keeps 2048."""
    import shutil

    from fsc.harness.lm import context_length
    from fsc.source import Source
    from tests.imports.published import save_published

    folder = save_published("llama", tmp_path / "tl", seed=3, max_position_embeddings=24)
    fsc_main("import", folder, "--out", tmp_path / "ck", "--store", tmp_path / "st", check=0)
    assert json.loads((tmp_path / "ck" / "config.json").read_text())["max_length"] == 24
    shutil.rmtree(folder)
    assert context_length(Source.read(str(tmp_path / "ck"))) == 24
    fsc_main("build", "tiny_attn", "--save", tmp_path / "own", "--store", tmp_path / "st",
             check=0)
    assert context_length(Source.read(str(tmp_path / "own"))) == 2048


def _sampling_seen(monkeypatch) -> list:
    """(top_k, top_p) of each decode generate_until asks fsc's decoder for."""
    import fsc.harness.lm

    seen, real = [], fsc.harness.lm.generate_batch

    def spy(model, tok, prompts, cfg, *args, **kw):
        seen.append((cfg.top_k, cfg.top_p))
        return real(model, tok, prompts, cfg, *args, **kw)

    monkeypatch.setattr(fsc.harness.lm, "generate_batch", spy)
    return seen


def test_sampling_defaults_are_the_models_generation_config_else_transformers(
        ar_recipe, tmp_path, monkeypatch, capsys):
    """A sampled request that names no top_k or top_p sampled from every token; the hf
    backend's transformers takes them from the model's generation_config.json, else top_k 50.
    What transformers would apply and fsc does not (typical_p) is said once; the repetition
    penalty is applied, so not said."""
    from harness_tasks import with_text_tokenizer

    from fsc.cli.main import main
    from fsc.harness.lm import FscLM

    seen = _sampling_seen(monkeypatch)
    sampled = {"until": [], "max_gen_toks": 2, "do_sample": True, "temperature": 1.0}
    greedy = {"until": [], "max_gen_toks": 2}
    _gen(FscLM(str(ar_recipe)), ("To be", sampled), ("To be", {**sampled, "top_k": 7,
                                                               "top_p": 0.9}), ("To be", greedy))
    assert sorted(seen) == [(0, 1.0), (7, 0.9), (50, 1.0)]  # (was (0, 1.0) for the first)
    assert "not applied" not in capsys.readouterr().err

    ckpt = tmp_path / "ckpt"
    assert main(["build", str(ar_recipe), "--save", str(ckpt), "--store", str(tmp_path / "st")]) == 0
    with_text_tokenizer(ckpt, {"do_sample": True, "temperature": 0.6, "top_k": 20,
                               "top_p": 0.95, "repetition_penalty": 1.05, "typical_p": 0.9})
    seen.clear()
    lm = FscLM(str(ckpt))
    _gen(lm, ("To be", sampled), ("To be", sampled), ("To be", greedy),
         ("To be", {**sampled, "top_k": 0, "top_p": None}))  # every token, as transformers
    assert sorted(seen) == [(0, 1.0), (0, 1.0), (20, 0.95)]
    err = " ".join(capsys.readouterr().err.split())
    assert "repetition_penalty" not in err  # applied (it was said not to be)
    assert err.count("note: generate_until: typical_p 0.9 (the model's generation_config.json) is "
                     "not applied by fsc's decoder") == 1  # said where a request samples
    with pytest.raises(UsageError, match="a request asks for no_repeat_ngram_size 3, which "
                       "fsc's decoder does not apply"):  # asked by the request: refused
        _gen(lm, ("To be", {**greedy, "no_repeat_ngram_size": 3}))


def test_a_generation_argument_at_a_value_that_applies_nothing_is_not_said(tmp_path):
    """transformers applies min_p and min_new_tokens only where they are set above 0 (min_p 0
    keeps every token): a generation config or a request that sets them to 0 was said to ask
    for what fsc's decoder does not apply."""
    from fsc.harness.lm import generation_defaults, not_applied

    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"min_p": 0.0, "min_new_tokens": 0, "repetition_penalty": 1.1}))
    model = generation_defaults(tmp_path)
    assert model == {"top_k": 50, "top_p": 1.0, "min_p": 0.0, "repetition_penalty": 1.1}
    asked = model | {"min_p": 0.0, "min_new_tokens": 0}
    assert not_applied(asked, True, model) == []  # (repetition_penalty is applied)
    assert not_applied(model | {"typical_p": 0.5}, True, model) == ["typical_p 0.5 (the request)"]


def test_min_p_is_applied_from_the_request_or_the_generation_config(ar_recipe, ar_lm, tmp_path,
                                                                     capsys):
    """min_p cuts after top_k and top_p, as transformers' MinPLogitsWarper (it was said not
    to be applied, and the answers sampled from every token): at min_p 1 only the most likely
    token is left, so a sampled request gives the greedy answer."""
    from harness_tasks import with_text_tokenizer

    from fsc.cli.main import main
    from fsc.harness.lm import FscLM

    contexts = ["To be", "Good night", "The king"]
    sampled = {"until": [], "max_gen_toks": 8, "do_sample": True, "temperature": 1.0, "top_k": 0}
    lm = ar_lm(batch_size=3)
    greedy = _gen(lm, *[(c, {"until": [], "max_gen_toks": 8}) for c in contexts])
    assert _gen(lm, *[(c, sampled) for c in contexts]) != greedy
    assert _gen(lm, *[(c, {**sampled, "min_p": 1.0}) for c in contexts]) == greedy
    ckpt = tmp_path / "ckpt"
    assert main(["build", str(ar_recipe), "--save", str(ckpt), "--store", str(tmp_path / "st")]) == 0
    with_text_tokenizer(ckpt, {"min_p": 1.0})
    model, plain = FscLM(str(ckpt)), {"until": [], "max_gen_toks": 8}
    assert (_gen(model, *[(c, sampled) for c in contexts])
            == _gen(model, *[(c, plain) for c in contexts]))
    assert _gen(model, *[(c, {**sampled, "min_p": 0.0}) for c in contexts]) != _gen(
        model, *[(c, plain) for c in contexts])  # the request's own over the model's
    assert "not applied" not in capsys.readouterr().err
