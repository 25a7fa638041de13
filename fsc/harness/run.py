"""`fsc eval CKPT --task harness`: lm-evaluation-harness tasks on an fsc model (fsc.harness.lm),
each metric a row of the store (eval_cells, task 'harness'). The run is recorded before the
model loads, so its duration is the work's; input refused before the model is asked anything
(a dataset that cannot be read, a template naming a field the documents lack) takes the run
away again, and a failure after leaves it failed with its error; --output-path writes the
harness's own results JSON (and, with --log-samples, its samples) as its command line does."""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import logging
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import datasets
import datasets.exceptions
import lm_eval
import lm_eval.evaluator
import yaml
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager

from fsc import paths
from fsc.blocks import block_setting
from fsc.errors import FscError, UsageError
from fsc.harness import COLUMNS, MC_SAMPLES
from fsc.harness.lm import (
    MAX_GEN_TOKS,
    FscLM,
    context_length,
    generation_steps,
    read_generation,
)
from fsc.hub.reach import quiet, unreachable
from fsc.loading import torch_device
from fsc.provenance import environment
from fsc.scale import recording
from fsc.source import Source
from fsc.text import first_line

# The harness's own seeds (Python's random, NumPy, torch, the few-shot draw) when --seed is not
# given: lm_eval's (`lm_eval --seed`'s default 0,1234,1234,1234), so a few-shot run draws the
# examples `lm_eval --model hf` draws; `--seed N` sets all four, as `lm_eval --seed N` does.
LM_EVAL_SEEDS = (0, 1234, 1234, 1234)


@dataclass(frozen=True)
class HarnessRequest:
    source: str
    tasks: tuple[str, ...]
    include_path: str | None = None
    limit: float | None = None
    num_fewshot: int | None = None
    mc_samples: int | None = None  # draws per block (diffusion; None: MC_SAMPLES)
    batch: int = 16
    seed: int = 0
    device: str = "cpu"
    max_length: int | None = None  # the tokens a request is cut to (None: the model's, FscLM)
    cached: bool = True
    steps: int | None = None  # K of generation (diffusion; default G)
    log_samples: bool = False  # the harness's per-document records, into output_path
    output_path: str | None = None  # the harness's results JSON (and samples) go here
    harness_seeds: tuple[int, int, int, int] = LM_EVAL_SEEDS  # (random, NumPy, torch, few-shot)


@dataclass
class Harnessed:
    """A harness run as stored: its id, its rows, the seconds its work took, and the files
    the harness wrote under --output-path."""

    run_id: str
    rows: list[dict]
    seconds: float
    files: list[str] = field(default_factory=list)


def harness_version() -> str:
    return importlib.metadata.version("lm_eval")


def check(request: HarnessRequest) -> tuple[Source, tuple[str, int, int]]:
    """(the checkpoint, read once: fsc.source.Source; its (mode, G, K)) of what is asked;
    UsageError, before any weights are loaded, for what cannot run."""
    if not request.tasks:
        raise UsageError("--task harness needs --tasks (e.g. arc_easy,piqa, or a task of "
                         "--include-path)")
    if request.include_path is not None and not Path(request.include_path).is_dir():
        raise UsageError(f"--include-path {request.include_path}: not a directory")
    if request.log_samples and request.output_path is None:
        raise UsageError("--log-samples needs --output-path DIR (the harness writes the samples "
                         "there)")
    if request.output_path is not None:
        paths.output_dir(Path(request.output_path), f"--output-path {request.output_path}",
                         replace=True)
    torch_device(request.device)  # no CUDA is refused here (the model fsc falls back to the CPU)
    src = Source.read(request.source)  # one line if it is not a model
    G = src.recipe.block_size
    generation_steps(request.steps, G, request.source, "--steps ")
    if G == 1 and request.mc_samples is not None:
        raise UsageError(f"--mc-samples {request.mc_samples}: {request.source} is autoregressive "
                         "(G 1): its likelihoods are exact, drawn by no Monte Carlo")
    return src, block_setting(None, None, request.steps, G)


# The output types the harness scores by log-likelihood (a multiple choice by its choices')
LIKELIHOOD_OUTPUTS = ("loglikelihood", "loglikelihood_rolling", "multiple_choice")


def on_likelihood(results: dict, task: str) -> bool:
    """Whether the harness's metrics of `task` rest on log-likelihoods: its output type asks the
    model for them, or (a group) one of its tasks' does; a generation task's rest on none."""
    config = results.get("configs", {}).get(task)
    if config is not None:
        return config.get("output_type") in LIKELIHOOD_OUTPUTS
    return any(on_likelihood(results, t) for t in results.get("group_subtasks", {}).get(task, ()))


def rows_of(results: dict, mode: str, G: int, K: int, mc: int, src: Source) -> list[dict]:
    """One row per (task, metric) of the harness's results; a row is a bound (with its `mc`
    draws) where a block-diffusion model's log-likelihoods make it."""
    version = harness_version()
    source, recipe = src.ref, src.recipe
    origin = src.weights(0) if not src.is_checkpoint else f"checkpoint {source}"
    rows = []
    for task, metrics in results.get("results", {}).items():
        n = results.get("n-samples", {}).get(task, {}).get("effective")
        fewshot = results.get("n-shot", {}).get(task)
        bound = mode == "diffusion" and on_likelihood(results, task)
        for key, value in metrics.items():
            if "," not in key or "_stderr" in key or not isinstance(value, (int, float)):
                continue  # a metric is "name,filter"; alias, sample_len and the like are not
            name, _, filt = key.partition(",")
            se = metrics.get(f"{name}_stderr,{filt}" if filt else f"{name}_stderr")
            rows.append({
                "checkpoint": source, "recipe": recipe.name, "recipe_hash": recipe.recipe_hash,
                "task": "harness", "mode": mode, "G": G, "K": K, "n": n,
                "harness_task": task, "metric": name if filt in ("", "none") else key,
                "value": float(value),
                "value_se": float(se) if isinstance(se, (int, float)) and math.isfinite(se) else None,
                "num_fewshot": fewshot if isinstance(fewshot, int) else None,
                "harness_version": version, "mc_samples": mc if bound else None,
                "bound": bound, "provenance": origin})
    return rows


@contextlib.contextmanager
def _quiet():
    """The harness without its chatter on fsc's stderr: its warnings and progress bars, and
    the `git describe` of the working directory it runs (fsc records its own provenance)."""
    logger = logging.getLogger("lm_eval")
    level = logger.level
    git = getattr(lm_eval.evaluator, "get_git_commit_hash", None)
    logger.setLevel(logging.ERROR)
    datasets.disable_progress_bars()
    if git is not None:
        lm_eval.evaluator.get_git_commit_hash = lambda: None
    try:
        with contextlib.redirect_stderr(io.StringIO()), quiet():  # progress bars, Hub retries
            yield
    finally:
        logger.setLevel(level)
        datasets.enable_progress_bars()
        if git is not None:
            lm_eval.evaluator.get_git_commit_hash = git


def model_args(request: HarnessRequest, source: str) -> dict:
    """The model fsc's arguments for `request` (as `--model_args` would give them)."""
    return {"pretrained": source, "mc_samples": request.mc_samples, "seed": request.seed,
            "max_length": request.max_length, "steps": request.steps, "cached": request.cached}


@contextlib.contextmanager
def _harness_errors(request: HarnessRequest):
    """The harness quiet, and what it raises (a dataset it cannot read, a template naming a
    field a document lacks) as one line (UsageError), said to be the Hub's where it is."""
    offline = unreachable(datasets=True)  # offline, the datasets come from the cache at once
    try:
        with _quiet():
            yield
    except (FscError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - datasets and the harness raise every kind
        hub = (f" (the Hub is out of reach: {offline}; only datasets in the local cache can be "
               "read)" if offline and from_the_hub(e) else "")
        raise UsageError(f"the harness could not run {','.join(request.tasks)}: "
                         f"{type(e).__name__}: {first_line(e)[:300]}{hub}") from None


def load_tasks(request: HarnessRequest, manager: TaskManager) -> list:
    """The tasks (and groups) `request` names, built as the harness builds them, their
    datasets read, before the model loads; UsageError for a dataset that cannot be read, and
    for a generation task's arguments that fsc's decoder cannot apply as transformers would,
    or that leave no room in max_length (read_generation)."""
    built = []
    with _harness_errors(request):
        for name in request.tasks:
            got = manager.load(name)  # a task, a group, or a tag's tasks
            built += [got["groups"][name]] if name in got["groups"] else list(got["tasks"].values())
            for task in got["tasks"].values():
                kwargs = getattr(getattr(task, "config", None), "generation_kwargs", None)
                if task.get_config("output_type") == "generate_until" and kwargs:
                    read_generation(kwargs, MAX_GEN_TOKS, request.max_length,
                                    f"task {task.task_name}")
    return built


def run_harness(request: HarnessRequest, lm: FscLM, tasks: list, args: dict,
                manager: TaskManager, tracker: EvaluationTracker | None = None) -> dict:
    """The harness's results of `request` on `lm` (made of `args`, model_args), in this
    process, on `tasks` (load_tasks, from `manager`); UsageError, one line, for what the
    harness raises (a template naming a field a document lacks)."""
    with _harness_errors(request):
        return lm_eval.simple_evaluate(
            model=lm, model_args=args, tasks=tasks,
            num_fewshot=request.num_fewshot, limit=request.limit, task_manager=manager,
            random_seed=request.harness_seeds[0], numpy_random_seed=request.harness_seeds[1],
            torch_random_seed=request.harness_seeds[2],
            fewshot_random_seed=request.harness_seeds[3],
            bootstrap_iters=1000, log_samples=request.log_samples,
            evaluation_tracker=tracker)


# What a Hub client or `datasets` raises for what it cannot fetch: no connection, offline mode
# (a ConnectionError), a file not in the local cache, an HTTP error, a Hub dataset not found.
HUB_ERRORS = (ConnectionError, TimeoutError, LocalEntryNotFoundError, HfHubHTTPError,
              datasets.exceptions.DatasetNotFoundError)


def from_the_hub(e: BaseException) -> bool:
    """Whether `e`, or an exception it was raised from, is a failure to fetch from the Hub (not
    one of the task's own data or templates)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, HUB_ERRORS):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def unparsed(folder: str, names: list[str] | None = None) -> str | None:
    """'FILE does not parse: ERROR (line N)' for the first task YAML under `folder` (with
    `names`, one named NAME.yaml for a NAME there) that YAML cannot read (the harness skips
    such a file without a word), or None."""

    class AnyTag(yaml.SafeLoader):  # the harness's own tags (!function) read as nothing
        pass

    AnyTag.add_multi_constructor("!", lambda loader, suffix, node: None)
    for path in sorted(Path(folder).glob("**/*.yaml")):
        if names is not None and path.stem not in names:
            continue
        try:
            yaml.load(path.read_text(), Loader=AnyTag)
        except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            what = getattr(e, "problem", None) or first_line(e) or type(e).__name__
            return f"{path} does not parse: {what}{where}"
    return None


def local_tasks(folder: str, names: tuple[str, ...] | list[str]) -> tuple[TaskManager, list[str]]:
    """(the harness's index of the task YAMLs under `folder` alone, the `names` it lacks);
    UsageError naming the YAML that does not parse where one is named for a task it lacks (the
    harness skips such a file without a word)."""
    manager = TaskManager(include_path=folder, include_defaults=False)
    missing = [t for t in names if t not in manager.all_tasks]
    broken = unparsed(folder, missing) if missing else None
    if broken:
        raise UsageError(f"--tasks: no harness task {', '.join(map(repr, missing))}: {broken}")
    return manager, missing


def task_manager(request: HarnessRequest) -> TaskManager:
    """The harness's index of the tasks `request` names (the --include-path tasks alone
    where they hold them all); UsageError for a task not found."""
    paths = [t for t in request.tasks if t.endswith((".yaml", ".yml")) or "/" in t]
    if paths:  # said before the harness indexes its thousands of tasks
        raise UsageError(f"--tasks {paths[0]}: a task is named by its YAML's `task:` field; "
                         "give that name to --tasks, and the YAML's folder as --include-path")
    manager = None
    if request.include_path is not None:  # local tasks alone: no index of the harness's thousands
        manager, missing = local_tasks(request.include_path, request.tasks)
        if missing:
            manager = None
    manager = manager or TaskManager(include_path=request.include_path)
    unknown = [t for t in request.tasks if t not in manager.all_tasks]
    if unknown:
        why = " (local tasks need --include-path)"
        if request.include_path:
            broken = unparsed(request.include_path)
            why = f" ({broken})" if broken else ""
        raise UsageError(f"--tasks: no harness task {', '.join(map(repr, unknown))}{why}")
    return manager


def save_output(tracker: EvaluationTracker, results: dict, log_samples: bool) -> list[str]:
    """Write the harness's results JSON (and with `log_samples` each task's samples) where its
    command line writes them for --output_path: under OUT/<model>/ (or, for OUT a .json name,
    beside it); the files written. FscError for one not written (the harness only logs it)."""
    samples = results.pop("samples", None) if log_samples else None
    tracker.save_results_aggregated(results=results, samples=samples)
    date = getattr(tracker, "date_id", None)  # set once the results are written
    out = Path(tracker.output_path)
    if out.suffix == ".json":
        folder, files = out.parent, [out.with_name(f"{out.stem}_{date}.json")]
    else:
        folder = out / str(tracker.general_config_tracker.model_name_sanitized)
        files = [folder / f"results_{date}.json"]
    for task in results.get("configs", {}) if samples is not None else ():
        tracker.save_results_samples(task_name=task, samples=samples[task])
        files.append(folder / f"samples_{task}_{date}.jsonl")
    missing = [f for f in files if date is None or not f.is_file()]
    if missing:
        raise FscError(f"--output-path {out}: the harness could not write {missing[0]}")
    return [str(f) for f in files]


def run_config(request: HarnessRequest, src: Source, mode: str, G: int, K: int) -> dict:
    """The config a harness run is recorded with."""
    return {"request": {**request.__dict__, "tasks": list(request.tasks)},
            "checkpoint": src.ref, "task": "harness", "mode": mode, "G": G, "K": K,
            "harness_version": harness_version(), "recipe": src.recipe.name,
            "recipe_hash": src.recipe.recipe_hash}


def evaluate_harness(request: HarnessRequest, st, command: str) -> Harnessed:
    """Run the harness and record its metrics as one eval run of `st`, registered before the
    model loads. Input refused before the model is asked anything (UsageError) takes the run
    away again, so a refusal leaves no run; a failure after leaves it failed with its error."""
    src, (mode, G, K) = check(request)
    # the length requests are cut to, as read (a published model's own by default): recorded
    request = replace(request, max_length=request.max_length or context_length(src),
                      mc_samples=request.mc_samples or (MC_SAMPLES if G > 1 else None))
    with _quiet():
        manager = task_manager(request)
    tracker = (EvaluationTracker(output_path=request.output_path)
               if request.output_path is not None else None)
    run = lm = None
    try:
        with recording(st, "eval", command, run_config(request, src, mode, G, K),
                       recipes=[src.recipe], environment=environment(request.device)) as run:
            t0 = time.perf_counter()
            args = model_args(request, src.ref)
            tasks = load_tasks(request, manager)
            lm = FscLM(device=request.device, batch_size=request.batch, **args)
            results = run_harness(request, lm, tasks, args, manager, tracker)
            seconds = time.perf_counter() - t0
            with _quiet():
                files = save_output(tracker, results, request.log_samples) if tracker else []
            rows = rows_of(results, lm.mode, lm.G, 0 if lm.mode == "ar" else lm.steps,
                           request.mc_samples, src)
            for row in rows:
                row["seconds"] = seconds
            run.add_rows("eval_cells", rows, COLUMNS)
    except UsageError:  # refused before the model was asked anything: no run stays
        if run is not None and not (lm is not None and lm.asked):
            st.remove_run(run.run_id)
        raise
    return Harnessed(run.run_id, rows, seconds, files)
