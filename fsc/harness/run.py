"""`fsc eval CKPT --task harness`: lm-evaluation-harness tasks on an fsc model (fsc.harness.lm),
each metric a row of the store (eval_cells, task 'harness')."""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import datasets
import lm_eval
import lm_eval.evaluator
import yaml
from lm_eval.tasks import TaskManager

from fsc.errors import FscError, UsageError
from fsc.harness.lm import FscLM
from fsc.hub.reach import quiet, unreachable
from fsc.loading import torch_device
from fsc.provenance import environment
from fsc.scale import recording
from fsc.source import is_checkpoint, load_source_recipe, resolve_checkpoint, weights_origin
from fsc.text import first_line


@dataclass(frozen=True)
class HarnessRequest:
    source: str
    tasks: tuple[str, ...]
    include_path: str | None = None
    limit: float | None = None
    num_fewshot: int | None = None
    mc_samples: int = 32
    batch: int = 16
    seed: int = 0
    device: str = "cpu"
    max_length: int = 2048
    cached: bool = True


def harness_version() -> str:
    return importlib.metadata.version("lm_eval")


def check(request: HarnessRequest) -> tuple[str, object]:
    """(the checkpoint, its recipe) of what is asked; UsageError, before any weights are
    loaded, for what cannot run."""
    if not request.tasks:
        raise UsageError("--task harness needs --tasks (e.g. arc_easy,piqa, or a task of "
                         "--include-path)")
    if request.include_path is not None and not Path(request.include_path).is_dir():
        raise UsageError(f"--include-path {request.include_path}: not a directory")
    torch_device(request.device)  # no CUDA is refused here (the model fsc falls back to the CPU)
    source = str(resolve_checkpoint(request.source))
    return source, load_source_recipe(source)  # one line if it is not a model


def rows_of(results: dict, mode: str, G: int, K: int, mc: int, source: str, recipe) -> list[dict]:
    """One row per (task, metric) of the harness's results."""
    version = harness_version()
    origin = weights_origin(source, 0) if not is_checkpoint(source) else f"checkpoint {source}"
    rows = []
    for task, metrics in results.get("results", {}).items():
        n = results.get("n-samples", {}).get(task, {}).get("effective")
        fewshot = results.get("n-shot", {}).get(task)
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
                "harness_version": version, "mc_samples": mc if mode == "diffusion" else None,
                "bound": mode == "diffusion", "provenance": origin})
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


def run_harness(request: HarnessRequest) -> tuple[dict, object]:
    """(the harness's results, the FscLM scored), in this process."""
    lm = FscLM(request.source, device=request.device, batch_size=request.batch,
               mc_samples=request.mc_samples, seed=request.seed, max_length=request.max_length,
               cached=request.cached)
    with _quiet():
        return _run(request, lm)


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


def _run(request: HarnessRequest, lm) -> tuple[dict, object]:
    manager = None
    if request.include_path is not None:  # local tasks alone: no index of the harness's thousands
        manager = TaskManager(include_path=request.include_path, include_defaults=False)
        missing = [t for t in request.tasks if t not in manager.all_tasks]
        broken = unparsed(request.include_path, missing) if missing else None
        if broken:
            raise UsageError(f"--tasks: no harness task {', '.join(map(repr, missing))}: {broken}")
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
    offline = unreachable(datasets=True)  # offline, the datasets come from the cache at once
    try:
        results = lm_eval.simple_evaluate(
            model=lm, tasks=list(request.tasks), num_fewshot=request.num_fewshot,
            limit=request.limit, task_manager=manager, random_seed=request.seed,
            numpy_random_seed=request.seed, torch_random_seed=request.seed,
            fewshot_random_seed=request.seed, bootstrap_iters=1000, log_samples=False)
    except (FscError, KeyboardInterrupt):
        raise
    except Exception as e:  # noqa: BLE001 - datasets and the harness raise every kind
        raise UsageError(f"the harness could not run {','.join(request.tasks)}: "
                         f"{type(e).__name__}: {first_line(e)[:300]}" + (
                             f" (the Hub is out of reach: {offline}; only datasets in the "
                             "local cache can be read)" if offline else "")) from None
    return results, lm


def evaluate_harness(request: HarnessRequest, st, command: str):
    """Run the harness and record its metrics as one eval run of `st`; returns (run id,
    rows, seconds)."""
    source, recipe = check(request)
    t0 = time.perf_counter()
    results, lm = run_harness(request)
    seconds = time.perf_counter() - t0
    K = 0 if lm.mode == "ar" else lm.steps
    rows = rows_of(results, lm.mode, lm.G, K, request.mc_samples, source, recipe)
    for row in rows:
        row["seconds"] = seconds
    config = {"request": {**request.__dict__, "tasks": list(request.tasks)},
              "checkpoint": source, "task": "harness", "mode": lm.mode, "G": lm.G, "K": K,
              "harness_version": harness_version(), "recipe": recipe.name,
              "recipe_hash": recipe.recipe_hash}
    with recording(st, "eval", command, config, recipes=[recipe],
                   environment=environment(request.device)) as run:
        run.add_rows("eval_cells", rows)
        run_id = run.run_id
    return run_id, rows, seconds
