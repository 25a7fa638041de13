"""`fsc eval`'s work: the grid a request asks of a checkpoint (fsc.eval.plan: filled in from
what training recorded and checked before any model is loaded) scored into an eval run in this
process or by an executor's workers (one group per length), each cell stored as it arrives; a
run resumed from the cells it holds.
"""

from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from fsc.errors import UsageError
from fsc.eval import loss
from fsc.eval.columns import as_drawn
from fsc.eval.grid import SHARED, Decoding, EvalCell, EvalGrid
from fsc.eval.plan import grid_of
from fsc.eval.request import EvalRequest, located
from fsc.eval.tasks import model_to_score, own_columns, samples_in, score, task_of
from fsc.harness import MC_SAMPLES
from fsc.provenance import environment
from fsc.scale import ExecutorSettings, Watch, executors, recording, work
from fsc.source import resolve_checkpoint
from fsc.store import Store
from fsc.store.connect import utcnow
from fsc.store.run_ids import resolve_run
from fsc.text import counted


@dataclass
class Evaluated:
    """A scored grid: its run, the store's file, and the cells in grid order."""

    run_id: str
    store: Path
    grid: EvalGrid
    cells: list[EvalCell] = field(default_factory=list)  # scored now
    held: list[EvalCell] = field(default_factory=list)  # a resumed run's, as stored

    @property
    def before(self) -> int:
        """Cells a resumed run held already."""
        return len(self.held)

    def every_cell(self) -> list[EvalCell]:
        """The run's cells, those it held and those scored now, in grid order."""
        return sorted(self.held + self.cells, key=grid_order)


def grid_order(cell: EvalCell) -> tuple:
    """A cell's place in its grid: length, then depth or pairs."""
    return cell.length, cell.depth or 0, cell.pairs or 0


# what tells one cell of a run from another
CELL_KEY = ("task", "variant", "length", "depth", "pairs", "mode", "G", "K", "policy",
            "threshold", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
            "checkpoint")


def cell_key(cell: EvalCell) -> tuple:
    """What tells `cell` from the others of its run (CELL_KEY), a sampling setting stored
    before it was recorded read as the value it drew with (columns.as_drawn)."""
    drawn = as_drawn({c: cell.get(c) for c in CELL_KEY})
    return tuple(drawn[c] for c in CELL_KEY)


PINNED = {"source": "", "baseline": "--baseline ", "scorer": "--scorer "}  # field: its option


def step_dirs(request: EvalRequest) -> dict[str, str]:
    """The step directory each training directory of `request` (its checkpoint, --baseline,
    --scorer) names now: what a resume of its run scores with, whatever training wrote since."""
    steps = {}
    for name in PINNED:
        ref = getattr(request, name)
        if ref is not None and resolve_checkpoint(ref) != Path(ref):
            steps[name] = str(resolve_checkpoint(ref))
    return steps


def resumed(st: Store, run_id: str, device: str) -> EvalRequest:
    """The request eval run `run_id` was made of (its device may change), with the step
    directories it scored in place of training directories, if it may resume;
    fsc.errors.NothingToDo when it finished, UsageError when one of those steps is gone."""
    config = st.run_config(run_id, "eval")
    asked = config.get("request")
    if not isinstance(asked, dict):
        raise UsageError(f"run {run_id} was recorded without its request; start a new run")
    if config.get("task") == "harness":
        raise UsageError(f"run {run_id} is a harness run, which is scored whole (its rows are "
                         f"stored when every task is done): run it again, {harness_again(asked)}")
    lists = {k: tuple(v) if isinstance(v, list) else v for k, v in asked.items()}
    request = replace(EvalRequest(**lists), resume=run_id, device=device)
    steps = config.get("step_dirs")
    if not isinstance(steps, dict):  # recorded before step_dirs: its checkpoint alone
        ck = config.get("checkpoint")
        steps = {"source": ck} if isinstance(ck, str) and Path(ck) != Path(request.source) else {}
    for name, step in steps.items():
        if not Path(step).is_dir():
            raise UsageError(f"run {run_id} scored {PINNED[name]}{getattr(request, name)} as "
                             f"{step}, which is gone; other weights would mix two models in "
                             "one run: start a new run")
    return replace(request, **steps)


# what `fsc eval --task harness` takes where an option is not given (a run records it): the
# command that runs one again leaves these values out. `fsc eval`'s options default to them
# (tests/core/test_small_mends.py holds the two together).
HARNESS_DEFAULTS = {"seed": 0, "device": "auto", "batch": 20, "mc_samples": MC_SAMPLES}


def harness_again(asked: dict) -> str:
    """The `fsc eval` command that runs a harness request (`asked`, as stored) again."""
    words = ["fsc", "eval", str(asked.get("source")), "--task", "harness", "--tasks",
             ",".join(asked.get("tasks") or ())]
    for name in ("include_path", "limit", "num_fewshot", "max_length", "steps", "mc_samples",
                 "batch", "seed", "device", "output_path"):
        value = asked.get(name)
        if value is None or (name in HARNESS_DEFAULTS and value == HARNESS_DEFAULTS[name]):
            continue
        words += ["--" + name.replace("_", "-"),
                  f"{value:g}" if isinstance(value, float) else str(value)]
    return "`" + shlex.join(words + ["--log-samples"] * bool(asked.get("log_samples"))) + "`"


def kept_warnings(st: Store, run_id: str, now: tuple[str, ...]) -> tuple[str, ...]:
    """The warnings eval run `run_id` keeps in its config; `now` (its grid's, found again) for
    a run stored before it kept them."""
    kept = st.run_config(run_id, "eval").get("warnings")
    return tuple(map(str, kept)) if isinstance(kept, list) else now


def stored_cells(st: Store, run_id: str, grid: EvalGrid) -> list[EvalCell]:
    """The cells eval run `run_id` of `grid` holds, as stored."""
    names, rows = st.query(f"SELECT * FROM eval_cells WHERE run_id = '{run_id}'")
    task, cells = task_of(grid), []
    for row in rows:
        got = dict(zip(names, row, strict=True))
        mine = set(own_columns(got["task"], task))
        cells.append(EvalCell.from_row({k: v for k, v in got.items()
                                        if k in mine or k in SHARED}))
    return cells


def _missing(grid: EvalGrid, have: set[tuple]) -> EvalGrid:
    """The grid less what a resumed run holds: lengths whose every cell is stored (genppl:
    decodings stored at every length); a cell measured again is not stored twice."""
    if not have:
        return grid
    per_length = Counter(key[CELL_KEY.index("length")] for key in have)
    lengths = tuple(n for n in grid.lengths
                    if per_length[n] < task_of(grid).cells_per_length(grid))
    if grid.gen is None:
        return replace(grid, lengths=lengths)

    def cell_of(d: Decoding, n: int) -> EvalCell:  # the record a decoding's cell will be
        return grid.cell({"task": "genppl", "length": n, "mode": d.mode, "G": d.G, "K": d.K,
                          "policy": d.policy, "threshold": d.threshold,
                          "temperature": d.temperature, "top_p": d.top_p, "top_k": d.top_k,
                          "min_p": d.min_p, "repetition_penalty": d.repetition_penalty,
                          **({"checkpoint": d.checkpoint} if d.checkpoint else {})},
                         own_columns(grid.task, task_of(grid)))

    left = tuple(d for d in grid.gen.decodings
                 if any(cell_key(cell_of(d, n)) not in have for n in lengths))
    return replace(grid, lengths=lengths, gen=replace(grid.gen, decodings=left))


def evaluate(request: EvalRequest, settings: ExecutorSettings, st: Store, command: str,
             watch: Watch) -> Evaluated:
    """Score the grid `request` asks for into a new eval run of `st` (or the missing cells of
    the run it resumes), recorded as `command`; each cell is stored as it is scored. A stop
    signal ends the run interrupted and raises fsc.interrupts.Stopped. A new run's start is
    when its work began: the model's loading is part of its time."""
    began = utcnow()
    if request.resume is not None:  # a prefix of the id, or `latest`
        request = resumed(st, resolve_run(st, request.resume, "eval", "--resume"),
                          request.device)
    else:
        request = located(request)
    grid, recipe, tok = grid_of(request)
    if request.resume is not None:  # its warnings as its run began (they name what it named)
        grid = replace(grid, warnings=kept_warnings(st, request.resume, grid.warnings))
    held = stored_cells(st, request.resume, grid) if request.resume else []
    have = {cell_key(c) for c in held}
    before, todo = len(have), _missing(grid, have)
    device = executors.run_device(request.device, settings)
    if settings.executor == "local":
        task_of(grid).fits(grid, recipe, device)
    for line in grid.warnings:
        watch.say(f"warning: {line}")
    engine = model = None
    if settings.remote:  # Ray is joined here: a cluster out of reach costs a line, not a run
        engine = executors.engine_for(settings, device.startswith("cuda"), work.evaluate,
                                      work.evaluate_to_file, watch.say,
                                      task_of(grid).cells_per_length(grid))
    else:
        model = model_to_score(grid.checkpoint, device, grid.settings.seed, grid.ar,
                               grid.changes)
    config = {"request": {k: v for k, v in asdict(request).items() if k != "resume"},
              "checkpoint": grid.checkpoint, "task": grid.task, "lengths": list(grid.lengths),
              # (what the task reads: a loss or genppl run has no depths, mqar's alone pairs)
              "depths": list(grid.depths) if grid.task in ("niah", "ruler") else None,
              "pairs": list(grid.pairs) if grid.task == "mqar" or (
                  grid.task == "loss" and loss.reads_pairs(grid)) else None,
              "samples": request.samples,
              "mode": grid.settings.mode, "G": grid.G, "K": grid.K, "seed": request.seed,
              "data": grid.data, "train_length": grid.settings.train_len,
              **({"scorer": grid.gen.scorer, "prompt_length": grid.gen.prompt_length,
                  "cells": 1 + len(grid.gen.decodings)} if grid.gen else {}),
              "warnings": list(grid.warnings),
              "recipe": recipe.name, "recipe_hash": recipe.recipe_hash,
              "step_dirs": step_dirs(request)}
    run = None
    try:
        with recording(st, "eval", command, config, recipes=[recipe],
                       environment=environment(device), resume=request.resume,
                       before=before, started=None if request.resume else began) as run:
            run.interrupt_note = lambda name: (f"interrupted ({name}) after "
                                               f"{counted(before + run.rows, 'cell')}")
            result = Evaluated(run.run_id, st.file, grid, held=held)

            def keep(cell: EvalCell) -> None:
                if cell_key(cell) in have:
                    return
                have.add(cell_key(cell))
                run.add_rows("eval_cells", [cell.columns()], task_of(grid).columns)
                result.cells.append(cell)
                watch.stored(cell)

            grid = todo
            if task_of(grid).ticks:  # a bar over samples (the other tasks' cells come quickly)
                watch.started(run.run_id, samples_in(grid), 0, None)
            if engine is None:
                score(model, tok, grid, grid.lengths, device, keep, watch.advanced)
            else:
                if hasattr(engine, "folder"):
                    engine.folder = executors.slurm_folder(st.dir, run.run_id)

                def arrived(cell: EvalCell) -> None:  # a worker's cell: its samples at once
                    if task_of(grid).ticks:
                        watch.advanced(grid.settings.samples)
                    keep(cell)

                _on_engine(engine, work.EvalJob(grid, device), arrived)
                result.cells.sort(key=grid_order)
    except UsageError:  # bad input found once the run began (a scorer's tokenizer that
        if run is not None and not request.resume and not run.rows:  # cannot carry the
            st.remove_run(run.run_id)  # text): nothing was scored, so no run stays, as
        raise  # for input refused before it
    return result


def _on_engine(engine, job: work.EvalJob, keep) -> None:
    """One group per length, scored where the engine runs it; cells stored as they arrive. A
    length given up after its retries fails the run (the cells that came are kept)."""
    lengths = job.grid.lengths
    failed = []
    for arrival in engine.arrivals(job, [work.Group(i, (n,)) for i, n in enumerate(lengths)]):
        for row in arrival.rows:
            keep(EvalCell.from_row(row))
        if arrival.failure is not None:
            failed.append(f"length {arrival.group.points[0]}: {arrival.failure}")
    if failed:
        raise executors.ExecutorError(f"{len(failed)} of {len(lengths)} lengths failed "
                                      f"({failed[0]})")
