"""fsc models in lm-evaluation-harness (`fsc eval --task harness`, the model `fsc`): local
tasks end to end into the store, bad input as one line, and (make test-slow) every request's
log-likelihood equal to the harness's own Hugging Face backend on imported models."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from harness_tasks import CHOICE, TEXT, with_text_tokenizer, write_tasks

from fsc.cli.main import main
from fsc.recipe import load_recipe
from fsc.store import Store


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(task folder, {name: checkpoint}): a G = 1 checkpoint and tiny_hybrid's (G 4)."""
    root = tmp_path_factory.mktemp("harness")
    tasks = write_tasks(root / "tasks", missing=True)
    ar = load_recipe("tiny_attn").model_copy(update={"name": "tiny_attn_ar", "block_size": 1})
    (root / "ar.yaml").write_text(ar.to_yaml())  # the autoregressive twin of tiny_attn
    ckpts = {}
    for name, recipe in (("ar", str(root / "ar.yaml")), ("hybrid", "tiny_hybrid")):
        ckpts[name] = str(root / name)
        assert main(["build", recipe, "--save", ckpts[name], "--store", str(root / "st0")]) == 0
    return tasks, ckpts


def _eval(fsc_main, ckpt, tasks, store, *extra, check=0):
    return fsc_main("eval", ckpt, "--task", "harness", "--include-path", tasks, "--store", store,
                    "--json", *extra, check=check)


def _gen_tasks(tasks: Path, folder: Path, **extra: str) -> Path:
    """`folder` holding fsc_gen's task again under each name of `extra`, its generation_kwargs
    given those lines more (e.g. fsc_hot="do_sample: true\n  temperature: 3.0")."""
    greedy = (tasks / "fsc_gen.yaml").read_text()
    folder.mkdir()
    for name, more in extra.items():
        (folder / f"{name}.yaml").write_text(
            greedy.replace("task: fsc_gen", f"task: {name}")
            .replace("max_gen_toks: 6", "max_gen_toks: 6" + (f"\n  {more}" if more else "")))
    return folder


def _samples(res) -> dict[str, list[dict]]:
    """The logged samples of an `fsc eval --task harness --log-samples --json` run, by task."""
    said = {}
    for f in json.loads(res.stdout)["files"]:
        name = Path(f).name
        if name.startswith("samples_"):
            task = name.removeprefix("samples_").rsplit("_", 1)[0]
            said[task] = [json.loads(line) for line in Path(f).read_text().splitlines()]
    return said


def _with_text(ckpt: str, dest: Path, generation: dict) -> Path:
    """A copy of checkpoint `ckpt` at `dest` with a text tokenizer and `generation` settings
    (harness_tasks.with_text_tokenizer)."""
    import shutil

    shutil.copytree(ckpt, dest)
    return with_text_tokenizer(dest, generation)


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_an_ar_checkpoint_scores_local_tasks_into_the_store(fsc_main, made, tmp_path):
    """Every request type runs; the metrics land in the store as eval rows; the rolling
    task's byte perplexity is the exact log-likelihood of its texts after the prefix token."""
    tasks, ckpts = made
    res = _eval(fsc_main, ckpts["ar"], tasks, tmp_path / "st", "--tasks",
                "fsc_choice,fsc_text,fsc_gen", "--batch", "2")
    doc = json.loads(res.stdout)
    rows = {(r["harness_task"], r["metric"]): r for r in doc["rows"]}
    assert set(rows) == {("fsc_choice", "acc"), ("fsc_choice", "acc_norm"),
                         ("fsc_text", "word_perplexity"), ("fsc_text", "byte_perplexity"),
                         ("fsc_text", "bits_per_byte"), ("fsc_gen", "exact_match")}
    assert all(r["bound"] is False and r["mode"] == "ar" and r["G"] == 1 for r in rows.values())
    assert rows[("fsc_choice", "acc")]["n"] == len(CHOICE)
    assert rows[("fsc_choice", "acc")]["value_se"] is not None
    # byte perplexity by hand: exp(−Σ log p(text | EOS) / Σ bytes), EOS the prefix (no BOS)
    from fsc.harness.likelihood import ar_batch
    from fsc.loading import load_model

    _, model = load_model(ckpts["ar"])
    logp = 0.0
    for d in TEXT:
        ids = [257] + list(d["text"].encode())
        logp += ar_batch(model.eval(), [(ids[:-1], ids[1:])], "cpu")[0][0]
    nbytes = sum(len(d["text"].encode()) for d in TEXT)
    assert rows[("fsc_text", "byte_perplexity")]["value"] == pytest.approx(
        math.exp(-logp / nbytes), rel=1e-5)
    _, stored = Store(tmp_path / "st").query(
        "SELECT harness_task, metric, value, harness_version, provenance FROM evaluation "
        "WHERE task = 'harness' ORDER BY harness_task, metric")
    assert len(stored) == 6 and all(r[3] for r in stored) and "checkpoint" in stored[0][4]
    # the run is recorded before the model loads: its duration holds the work
    run = json.loads(fsc_main("runs", "show", doc["run_id"], "--store", tmp_path / "st",
                              "--json", check=0).stdout)
    assert run["status"] == "finished" and run["duration_s"] >= doc["seconds"]


def test_a_limit_below_one_is_a_fraction_of_the_documents(fsc_main, made, tmp_path):
    """As lm_eval --limit: 0.5 of fsc_choice's documents (the harness rounds up)."""
    tasks, ckpts = made
    res = _eval(fsc_main, ckpts["ar"], tasks, tmp_path / "st", "--tasks", "fsc_choice",
                "--limit", "0.5")
    assert {r["n"] for r in json.loads(res.stdout)["rows"]} == {math.ceil(len(CHOICE) / 2)}
    for limit, says in (("1.5", "1.5 is neither a whole number of documents nor a fraction "
                                "below 1"), ("0", "0.0 must be > 0")):
        res = fsc_main("eval", ckpts["ar"], "--tasks", "fsc_choice", "--limit", limit, check=2)
        assert f"Invalid value for '--limit': {says}" in res.stderr


@pytest.mark.slow  # two harness runs
def test_max_length_cuts_the_rolling_windows(fsc_main, made, tmp_path):
    """--max-length is the model's max_length: a rolling text read in 8-token windows scores
    otherwise than in the default's one window; it is the harness's option alone."""
    tasks, ckpts = made

    def bpb(*extra):
        res = _eval(fsc_main, ckpts["ar"], tasks, tmp_path / "st", "--tasks", "fsc_text", *extra)
        return {r["metric"]: r["value"] for r in json.loads(res.stdout)["rows"]}["bits_per_byte"]

    assert bpb("--max-length", "8") != bpb()
    res = fsc_main("eval", ckpts["ar"], "--max-length", "8", "--store", tmp_path / "st", check=2)
    assert "--max-length: for --task harness only" in res.stderr


@pytest.mark.slow  # the harness end to end again at G > 1 (the bound itself: test_harness_likelihood)
def test_a_diffusion_checkpoint_is_said_to_be_a_bound(fsc_main, made, tmp_path):
    tasks, ckpts = made
    res = _eval(fsc_main, ckpts["hybrid"], tasks, tmp_path / "st", "--tasks",
                "fsc_choice,fsc_text", "--mc-samples", "4", "--limit", "3")
    rows = json.loads(res.stdout)["rows"]
    assert rows and all(r["bound"] is True and r["mc_samples"] == 4 and r["G"] == 4
                        for r in rows)
    assert {r["n"] for r in rows} == {3}
    table = fsc_main("eval", ckpts["hybrid"], "--task", "harness", "--include-path", tasks,
                     "--store", tmp_path / "st", "--tasks", "fsc_choice", "--mc-samples", "2",
                     "--limit", "2", check=0).stdout
    assert "are bounds" in table and "2 draws per block" in table
    fsc_main("report", "--store", tmp_path / "st", "--out", tmp_path / "r.md", check=0)
    page = (tmp_path / "r.md").read_text()
    assert "Downstream tasks (lm-evaluation-harness)" in page and "fsc_choice" in page
    assert "yes, 2 draws/block" in page


@pytest.mark.parametrize(("args", "says"), [
    pytest.param(["--tasks", "no_such_task"], "no harness task 'no_such_task'",
                 marks=pytest.mark.slow),  # the harness indexes its thousands of tasks first
    (["--tasks", "fsc_missing"], "fsc_missing"),
    (["--tasks", ""], "--tasks"),
])
def test_bad_tasks_are_one_line_and_nothing_is_stored(fsc_main, made, tmp_path, monkeypatch,
                                                      args, says):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tasks, ckpts = made
    res = _eval(fsc_main, ckpts["ar"], tasks, tmp_path / "st", *args, check=2)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], res.stderr
    assert not (tmp_path / "st").exists() or not Store(tmp_path / "st").query(
        "SELECT * FROM eval_cells")[1]


def test_harness_options_belong_to_the_harness(fsc_main, made):
    _, ckpts = made
    res = fsc_main("eval", ckpts["ar"], "--task", "loss", "--limit", "3", check=2)
    assert "--limit: for --task harness only" in res.stderr


def test_a_failure_inside_the_harness_leaves_the_run_failed_with_its_error(
        fsc_main, made, tmp_path, monkeypatch):
    """Once the model has been asked (here its scoring fails); input refused before that
    leaves no run (test_harness_refusals)."""
    import fsc.harness.lm

    def fails(*a, **k):
        raise RuntimeError("the scorer broke")

    monkeypatch.setattr(fsc.harness.lm, "ar_batch", fails)
    tasks, ckpts = made
    res = _eval(fsc_main, ckpts["ar"], tasks, tmp_path / "st", "--tasks", "fsc_choice", check=2)
    assert "the harness could not run fsc_choice: RuntimeError: the scorer broke" in res.stderr
    [run] = json.loads(fsc_main("runs", "--store", tmp_path / "st", "--json", check=0).stdout)
    shown = fsc_main("runs", "show", run["run_id"], "--store", tmp_path / "st", check=0).stdout
    assert run["status"] == "failed" and run["kind"] == "eval"
    assert "error    UsageError: the harness could not run fsc_choice" in shown


def test_a_generation_metric_of_a_diffusion_model_is_no_bound(fsc_main, made, tmp_path):
    """Only the metrics that rest on log-likelihoods are bounds at G > 1: a generate_until
    task's rows are bound = false, with no Monte Carlo draws."""
    tasks, _ = made
    res = _eval(fsc_main, "tiny_attn", tasks, tmp_path / "st", "--tasks", "fsc_gen,fsc_choice",
                "--mc-samples", "2", "--limit", "1")
    rows = {(r["harness_task"], r["metric"]): r for r in json.loads(res.stdout)["rows"]}
    assert {k: (r["mode"], r["bound"], r["mc_samples"]) for k, r in rows.items()} == {
        ("fsc_gen", "exact_match"): ("diffusion", False, None),
        ("fsc_choice", "acc"): ("diffusion", True, 2),
        ("fsc_choice", "acc_norm"): ("diffusion", True, 2)}
    _, stored = Store(tmp_path / "st").query(
        "SELECT harness_task, bound, mc_samples FROM evaluation WHERE task = 'harness' "
        "AND metric IN ('exact_match', 'acc') ORDER BY harness_task")
    assert stored == [("fsc_choice", True, 2), ("fsc_gen", False, None)]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_steps_log_samples_and_output_path_as_lm_eval_takes_them(fsc_main, made, tmp_path):
    """--steps K reaches the model's generation (rows and the harness's own record say K);
    --output-path writes lm_eval's results JSON under DIR/<model>/, --log-samples a JSONL of
    each document; what cannot apply is one line before any weights load."""
    tasks, ckpts = made
    out = tmp_path / "out"
    res = _eval(fsc_main, ckpts["hybrid"], tasks, tmp_path / "st", "--tasks", "fsc_gen",
                "--limit", "1", "--steps", "2", "--log-samples", "--output-path", out)
    doc = json.loads(res.stdout)
    assert {r["K"] for r in doc["rows"]} == {2}
    results = [Path(f) for f in doc["files"] if Path(f).name.startswith("results_")]
    samples = [Path(f) for f in doc["files"] if Path(f).name.startswith("samples_fsc_gen_")]
    assert len(results) == 1 and len(samples) == 1 and results[0].parent.parent == out
    written = json.loads(results[0].read_text())
    assert written["config"]["model_args"]["steps"] == 2 and "fsc_gen" in written["results"]
    [line] = samples[0].read_text().splitlines()
    assert json.loads(line)["doc"] == {"question": "Say A:", "answer": "A"}
    assert f"wrote {results[0]}" in res.stderr
    for args, says in ((["--steps", "2"], "--steps 2: "),  # an AR checkpoint generates with no K
                       (["--steps", "1,2"], "--steps 1,2: --task harness generates with one K"),
                       (["--log-samples"], "--log-samples needs --output-path DIR"),
                       (["--output-path", tasks / "fsc_gen.yaml"], "--output-path ")):
        res = _eval(fsc_main, ckpts["ar"], tasks, tmp_path / "st2", "--tasks", "fsc_gen", *args,
                    check=2)
        assert res.stderr.startswith(f"error: {says}") and res.stderr.count("\n") == 1, res.stderr
    assert not (tmp_path / "st2").exists()


@pytest.mark.slow  # three generation tasks through the harness
def test_a_task_sampling_at_top_k_1_answers_as_greedy(fsc_main, made, tmp_path):
    """A task's generation_kwargs reach the decoder from the command line: sampled hot at
    top_k 1, every answer is the greedy one (top_k was ignored: they drew apart), and without
    top_k they do draw apart."""
    tasks, ckpts = made
    folder = _gen_tasks(tasks, tmp_path / "tasks", fsc_gen="",
                        fsc_hot="do_sample: true\n  temperature: 3.0",
                        fsc_top1="do_sample: true\n  temperature: 3.0\n  top_k: 1")
    res = _eval(fsc_main, ckpts["ar"], folder, tmp_path / "st", "--tasks",
                "fsc_gen,fsc_hot,fsc_top1", "--log-samples", "--output-path", tmp_path / "out")
    said = {task: [s["resps"] for s in rows] for task, rows in _samples(res).items()}
    assert said["fsc_top1"] == said["fsc_gen"]
    assert said["fsc_hot"] != said["fsc_gen"]


@pytest.mark.slow  # two generation tasks through the harness
def test_a_task_sampling_without_top_k_takes_the_models_generation_config(fsc_main, made,
                                                                          tmp_path):
    """From the command line: a checkpoint whose generation_config.json says top_k 1 answers a
    hot sampled task (no top_k of its own) as greedily as a greedy task, as transformers'
    generate would under the hf model (it sampled from every token)."""
    tasks, ckpts = made
    ckpt = _with_text(ckpts["ar"], tmp_path / "ckpt", {"top_k": 1})
    folder = _gen_tasks(tasks, tmp_path / "tasks", fsc_gen="",
                        fsc_hot="do_sample: true\n  temperature: 3.0")
    res = _eval(fsc_main, ckpt, folder, tmp_path / "st", "--tasks", "fsc_gen,fsc_hot",
                "--log-samples", "--output-path", tmp_path / "out")
    said = {task: [s["resps"] for s in rows] for task, rows in _samples(res).items()}
    assert said["fsc_hot"] == said["fsc_gen"]
    assert "not applied" not in res.stderr


@pytest.mark.slow  # a generation task through the harness
def test_what_fsc_does_not_apply_is_said_at_the_command_line(fsc_main, made, tmp_path):
    """`fsc eval --task harness` quiets the harness's stderr while it runs; the note of a
    generation argument fsc's decoder does not apply (typical_p) was swallowed with it: the model
    says it once on the command's stderr."""
    tasks, ckpts = made
    ckpt = _with_text(ckpts["ar"], tmp_path / "ckpt", {"typical_p": 0.8})
    folder = _gen_tasks(tasks, tmp_path / "tasks", fsc_hot="do_sample: true\n  temperature: 1.0")
    res = _eval(fsc_main, ckpt, folder, tmp_path / "st", "--tasks", "fsc_hot")
    err = " ".join(res.stderr.split())
    assert err.count("note: generate_until: typical_p 0.8 (the model's generation_config.json) "
                     "is not applied by fsc's decoder") == 1


@pytest.mark.slow  # two runs of a generation task through the harness
def test_a_models_repetition_penalty_reaches_a_greedy_task(fsc_main, made, tmp_path):
    """From the command line: a checkpoint whose generation_config.json sets
    repetition_penalty answers a greedy task under it (transformers applies it to greedy
    decoding too): the answers are those of `fsc decode --repetition-penalty`, not the
    unpenalized ones, and nothing is said to be left unapplied."""
    tasks, ckpts = made
    said = {}
    for name, config in (("plain", {}), ("penalized", {"repetition_penalty": 4.0})):
        ckpt = _with_text(ckpts["ar"], tmp_path / name, config)
        res = _eval(fsc_main, ckpt, tasks, tmp_path / "st", "--tasks", "fsc_gen",
                    "--log-samples", "--output-path", tmp_path / f"out-{name}")
        assert "not applied" not in res.stderr
        said[name] = _samples(res)["fsc_gen"]
    assert [s["resps"] for s in said["plain"]] != [s["resps"] for s in said["penalized"]]
    for s in said["penalized"]:  # each answer is the penalized decode of its context
        context = s["arguments"]["gen_args_0"]["arg_0"]
        out = fsc_main("decode", tmp_path / "penalized", "--mode", "ar", "--prompt", context,
                       "--length", "6", "--repetition-penalty", "4", "--json")
        text = json.loads(out.stdout)["text"].split("\n")[0]
        assert s["resps"] == [[text]]


# ---- exact against the harness's own Hugging Face backend (make test-slow) --------------------

def _imported(family: str, root):
    """A tiny random `family` model saved by transformers with a character tokenizer, and
    its `fsc import`."""
    from test_hf_scorer import CHARS, _char_tokenizer

    from tests.imports.published import save_published

    folder = save_published(family, root / family, seed=2, vocab_size=len(CHARS) + 2)
    _char_tokenizer(folder)
    assert main(["import", str(folder), "--out", str(root / f"{family}-fsc"),
                 "--store", str(root / "st")]) == 0
    return folder, root / f"{family}-fsc"


@pytest.mark.slow  # transformers builds three models and the harness runs both backends
@pytest.mark.parametrize("family", ["llama", "qwen3", "mamba2"])
def test_every_request_equals_the_hf_backend(family, tmp_path, fsc_main):
    """loglikelihood (with greedy flags) and loglikelihood_rolling of the same requests
    through lm-eval's `hf` model and fsc's agree to 1e-4 relative, and a multiple-choice task
    scores the same accuracy; again with a max_length of 24 tokens, so that long requests are
    cut from the left and texts are read in several windows."""
    import lm_eval
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    from fsc.harness.lm import FscLM

    folder, ckpt = _imported(family, tmp_path)
    hf = get_model("hf")(pretrained=str(folder), device="cpu", batch_size=3, dtype="float32")
    ours = FscLM(str(ckpt), batch_size=3)
    pairs = [(d["question"], c) for d in CHOICE for c in d["choices"]] + [("", "Lo, ")]
    ll = [Instance("loglikelihood", {}, p, i) for i, p in enumerate(pairs)]
    rolling = [Instance("loglikelihood_rolling", {}, (d["text"],), i) for i, d in enumerate(TEXT)]
    want, got = hf.loglikelihood(ll), ours.loglikelihood(ll)
    for (a, ga), (b, gb) in zip(want, got):
        assert b == pytest.approx(a, rel=1e-4) and ga == gb
    for a, b in zip(hf.loglikelihood_rolling(rolling), ours.loglikelihood_rolling(rolling)):
        assert b == pytest.approx(a, rel=1e-4)
    short = (get_model("hf")(pretrained=str(folder), device="cpu", batch_size=3,
                             dtype="float32", max_length=24), FscLM(str(ckpt), max_length=24))
    assert max(len(q) + len(c) for q, c in pairs) > 24 and len(TEXT[0]["text"]) > 48
    for (a, ga), (b, gb) in zip(short[0].loglikelihood(ll), short[1].loglikelihood(ll)):
        assert b == pytest.approx(a, rel=1e-4) and ga == gb
    for a, b in zip(*(m.loglikelihood_rolling(rolling) for m in short)):
        assert b == pytest.approx(a, rel=1e-4)
    tasks = write_tasks(tmp_path / "tasks")
    manager = TaskManager(include_path=str(tasks))
    acc = [lm_eval.simple_evaluate(model=m, tasks=["fsc_choice"], task_manager=manager,
                                   bootstrap_iters=0)["results"]["fsc_choice"]["acc,none"]
           for m in (hf, ours)]
    assert acc[0] == acc[1]
    res = _eval(fsc_main, ckpt, tasks, tmp_path / "st", "--tasks", "fsc_choice")  # the CLI too
    rows = {r["metric"]: r for r in json.loads(res.stdout)["rows"]}
    assert rows["acc"]["value"] == acc[0] and rows["acc"]["bound"] is False


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla",
                                    "tiny_gated_delta", "tiny_hybrid"])
def test_a_trained_checkpoint_of_each_mixer_runs_the_harness(recipe, fsc_main, tmp_path):
    tasks = write_tasks(tmp_path / "tasks")
    fsc_main("train", recipe, "--data", "shakespeare", "--seq-len", "32", "--train-steps", "3",
             "--batch", "2", "--out", tmp_path / "run", "--store", tmp_path / "st", check=0)
    res = _eval(fsc_main, tmp_path / "run", tasks, tmp_path / "st", "--tasks",
                "fsc_choice,fsc_text,fsc_gen", "--mc-samples", "2", "--limit", "2")
    rows = json.loads(res.stdout)["rows"]
    assert len(rows) == 6 and all(math.isfinite(r["value"]) for r in rows)


@pytest.mark.slow  # a new interpreter imports the harness: seconds
def test_python_m_fsc_harness_is_the_harness_command_line(made):
    tasks, ckpts = made
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-m", "fsc.harness", "--model", "fsc",
                          "--model_args", f"pretrained={ckpts['ar']}", "--batch_size", "2",
                          "--device", "cpu", "--tasks", "fsc_choice", "--include_path",
                          str(tasks), "--limit", "2"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "fsc_choice" in out.stdout and "acc" in out.stdout


@pytest.mark.slow  # transformers and both harness backends
def test_a_bos_adding_bpe_llama_equals_the_hf_backend(tmp_path, fsc_main):
    """An imported Llama whose byte-level BPE tokenizer begins a text with `<s>`: every
    loglikelihood (with its greedy flag), every rolling text and every generate_until answer
    through fsc equal lm-eval's `hf` backend on the published folder; through the command
    line, the tasks' metrics too."""
    import lm_eval
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model
    from lm_eval.tasks import TaskManager

    from fsc.harness.lm import FscLM
    from tests.eval.harness_tasks import GEN
    from tests.imports.published import save_llama_with_bos

    folder = save_llama_with_bos(tmp_path / "tl")
    fsc_main("import", folder, "--out", tmp_path / "ck", "--store", tmp_path / "st", check=0)
    hf = get_model("hf")(pretrained=str(folder), device="cpu", batch_size=1, dtype="float32")
    ours = FscLM(str(tmp_path / "ck"), batch_size=1)
    pairs = [(d["question"], c) for d in CHOICE for c in d["choices"]] + [("", "Lo, ")]
    ll = [Instance("loglikelihood", {}, p, i) for i, p in enumerate(pairs)]
    for (a, ga), (b, gb) in zip(hf.loglikelihood(ll), ours.loglikelihood(ll)):
        assert b == pytest.approx(a, rel=1e-4) and ga == gb
    rolling = [Instance("loglikelihood_rolling", {}, (d["text"],), i) for i, d in enumerate(TEXT)]
    for a, b in zip(hf.loglikelihood_rolling(rolling), ours.loglikelihood_rolling(rolling)):
        assert b == pytest.approx(a, rel=1e-4)
    gen = [Instance("generate_until", {}, (d["question"], {"until": ["\n"], "max_gen_toks": 8,
                                                           "do_sample": False}), i)
           for i, d in enumerate(GEN)]
    assert ours.generate_until(gen) == hf.generate_until(gen)
    tasks = write_tasks(tmp_path / "tasks")
    names = ["fsc_choice", "fsc_text", "fsc_gen"]
    want = lm_eval.simple_evaluate(model=hf, tasks=names, bootstrap_iters=0,
                                   task_manager=TaskManager(include_path=str(tasks)))["results"]
    res = _eval(fsc_main, tmp_path / "ck", tasks, tmp_path / "st", "--tasks", ",".join(names))
    rows = json.loads(res.stdout)["rows"]
    assert len(rows) == 6
    for r in rows:
        assert r["value"] == pytest.approx(want[r["harness_task"]][f"{r['metric']},none"],
                                           rel=1e-4), r


def _both_backends(tmp_path, fsc_main, generation: dict):
    """(the harness's hf model, fsc's) of one tiny Llama with a BPE tokenizer and a
    generation_config.json of `generation`, as published and as `fsc import` made it."""
    from lm_eval.api.registry import get_model

    from fsc.harness.lm import FscLM
    from tests.imports.published import save_bpe_tokenizer, save_published

    folder = tmp_path / "tl"  # the vocabulary the tokenizer's: no id past it for hf to emit
    save_published("llama", folder, seed=3, vocab_size=300, bos_token_id=1, eos_token_id=2)
    save_bpe_tokenizer(folder)
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": 1, "eos_token_id": 2, **generation}))
    fsc_main("import", folder, "--out", tmp_path / "ck", "--store", tmp_path / "st", check=0)
    hf = get_model("hf")(pretrained=str(folder), device="cpu", batch_size=1, dtype="float32")
    return hf, FscLM(str(tmp_path / "ck"), batch_size=1)


@pytest.mark.slow  # transformers and both harness backends
def test_a_repetition_penalty_answers_as_the_hf_backend(tmp_path, fsc_main):
    """A model whose generation_config.json sets repetition_penalty: transformers' generate
    applies it under the `hf` model, greedy requests included; fsc's greedy and penalized
    answers equal the hf backend's (and differ from the unpenalized ones, so the penalty is
    seen to act); a request's own penalty overrides the model's."""
    from lm_eval.api.instance import Instance

    hf, ours = _both_backends(tmp_path, fsc_main, {"repetition_penalty": 1.6})
    asks = [("Say A:", {}), ("To be, or not", {}), ("To be, or not", {"repetition_penalty": 1.0}),
            ("Say B:", {"repetition_penalty": 1.2})]
    gen = [Instance("generate_until", {}, (q, {"until": ["\n"], "max_gen_toks": 16,
                                                "do_sample": False, **extra}), i)
           for i, (q, extra) in enumerate(asks)]
    answers = ours.generate_until(gen)
    assert answers == hf.generate_until(gen)
    assert answers[1] != answers[2]  # 1.6 against none: the penalty changed the answer
    assert all(len(a) > 4 for a in answers)  # (no answer cut short to nothing)


@pytest.mark.slow  # transformers and both harness backends
def test_a_models_min_p_answers_as_the_hf_backend(tmp_path, fsc_main):
    """A model whose generation_config.json sets min_p: transformers' generate cuts to the tokens
    at least min_p times as likely as the most likely one where it samples. At min_p 1 a sampled
    request is left the most likely token alone: fsc's sampled answers equal the hf backend's
    and the greedy ones (fsc sampled from every token: other answers); a request's own min_p
    overrides the model's."""
    from lm_eval.api.instance import Instance

    hf, ours = _both_backends(tmp_path, fsc_main, {"min_p": 1.0})

    def asked(extra):
        return [Instance("generate_until", {}, (q, {"until": ["\n"], "max_gen_toks": 16,
                                                     **extra}), i)
                for i, q in enumerate(("Say A:", "To be, or not"))]

    hot = {"do_sample": True, "temperature": 1.0, "top_k": 0}
    answers = ours.generate_until(asked(hot))
    assert answers == hf.generate_until(asked(hot))
    assert answers == ours.generate_until(asked({"do_sample": False}))
    assert ours.generate_until(asked({**hot, "min_p": 0.0})) != answers
    assert all(len(a) > 4 for a in answers)


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_json_names_the_checkpoint_scored_as_other_tasks_do(fsc_main, made, tmp_path):
    """`--json` of a harness run gave the checkpoint as typed (a training directory), where
    every other task gives the step it scored."""
    import shutil

    tasks, ckpts = made
    shutil.copytree(ckpts["ar"], tmp_path / "run" / "step-000001")
    (tmp_path / "run" / "latest").write_text("step-000001\n")
    res = _eval(fsc_main, tmp_path / "run", tasks, tmp_path / "st", "--tasks", "fsc_choice",
                "--limit", "1")
    assert json.loads(res.stdout)["checkpoint"] == str(tmp_path / "run" / "step-000001")


def _contexts(samples: list[dict]) -> dict[int, str]:
    """Each logged document's first request context, by document id."""
    def first(args):  # [(ctx, continuation), ...] in memory; {"gen_args_0": {"arg_0": ctx}}
        while not isinstance(args, str):  # as written
            args = next(iter(args.values())) if isinstance(args, dict) else args[0]
        return args

    return {s["doc_id"]: first(s["arguments"]) for s in samples}


@pytest.mark.slow  # the harness three times
def test_few_shot_examples_are_lm_evals_unless_seeded(fsc_main, made, tmp_path):
    """--num-fewshot drew its examples with --seed's 0 where lm_eval draws with 1234: each
    document's context, and with it the score, differed from `lm_eval --model hf`'s. Without
    --seed they are the harness's own; --seed N sets its four seeds, as `lm_eval --seed N`."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from fsc.harness.lm import FscLM

    tasks, ckpts = made

    def harness(**seeds) -> dict[int, str]:
        got = lm_eval.simple_evaluate(model=FscLM(ckpts["ar"], batch_size=1),
                                      tasks=["fsc_choice"], num_fewshot=2, bootstrap_iters=0,
                                      log_samples=True, **seeds,
                                      task_manager=TaskManager(include_path=str(tasks)))
        return _contexts(got["samples"]["fsc_choice"])

    def ours(*seed) -> dict[int, str]:
        res = _eval(fsc_main, ckpts["ar"], tasks, tmp_path / "st", "--tasks", "fsc_choice",
                    "--num-fewshot", "2", "--log-samples", "--output-path",
                    tmp_path / f"out{len(seed)}", *seed)
        return _contexts(_samples(res)["fsc_choice"])

    default = harness()
    assert ours() == default
    seeded = harness(random_seed=0, numpy_random_seed=0, torch_random_seed=0,
                     fewshot_random_seed=0)
    assert seeded != default  # (else the test could not tell the seeds apart)
    assert ours("--seed", "0") == seeded
