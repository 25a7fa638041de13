"""The unit of work an executor hands to a worker: a group of sweep points of one recipe (or
of an eval grid's lengths), run in the worker's process with the worker's device, returned (or
written) as plain rows.

A row is a dict: a point's profile_points columns (PointResult.columns) plus `samples` and
`traceback`, or a cell's eval_cells columns (EvalCell.columns), so it crosses a process pool, a
Ray object store or a JSON-lines file and becomes the same record on the driver.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fsc import ops
from fsc.eval.grid import EvalGrid
from fsc.eval.tasks import model_to_score, score
from fsc.loading import set_threads
from fsc.profile import Sweep
from fsc.sweep import Point, SweepConfig
from fsc.sweep_results import PointResult
from fsc.tokenizer import load_tokenizer


@dataclass(frozen=True)
class Group:
    """Points of one recipe, in sweep order: a model is built once for all of them (for an
    eval grid: the prompt lengths one worker scores)."""

    index: int
    points: tuple[Any, ...]


def cost(points: Iterable[Point]) -> int:
    """A rough size of some points' work, to hand out the largest first: a step reads the
    cache, which grows with S × B (a recurrent cache does not, so this overstates Mamba's)."""
    return sum((p.S + p.G) * p.B for p in points)


def groups(points: list[Point], lanes: int) -> list[Group]:
    """The points by recipe (a group builds its model once), each recipe's run cut into
    contiguous pieces, the costliest halved first, until there are twice as many groups as
    `lanes` (points run at once) where the points allow; costliest group first, so the last
    to finish is a small one."""
    by_ref: dict[str, list[Point]] = {}
    for p in points:
        by_ref.setdefault(p.ref, []).append(p)
    pieces = [list(v) for v in by_ref.values()]
    want = 2 * lanes if lanes > 1 else 1
    while len(pieces) < want:
        splittable = [q for q in pieces if len(q) > 1]
        if not splittable:
            break
        largest = max(splittable, key=cost)
        i = pieces.index(largest)
        half = len(largest) // 2
        pieces[i:i + 1] = [largest[:half], largest[half:]]
    pieces.sort(key=cost, reverse=True)
    return [Group(i, tuple(piece)) for i, piece in enumerate(pieces)]


def to_row(r: PointResult) -> dict[str, Any]:
    """A point as a worker sends it: its columns, its timings and its traceback."""
    return {**r.columns(), "samples": r.samples, "traceback": r.traceback}


def worker_device(cfg: SweepConfig) -> SweepConfig:
    """The sweep's settings as a worker runs them: CUDA on the one device the worker sees
    (cuda:0 under its CUDA_VISIBLE_DEVICES), else the CPU."""
    if cfg.device.startswith("cuda"):
        return replace(cfg, device="cuda:0")
    return cfg


def measure(cfg: SweepConfig, group: Group,
            on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Measure a group in this process; each row also goes to `on_row` as it finishes."""
    set_threads()
    ops.use_backend(cfg.backend)
    rows: list[dict[str, Any]] = []

    def keep(result: PointResult) -> None:
        row = to_row(result)
        rows.append(row)
        if on_row is not None:
            on_row(row)

    Sweep(worker_device(cfg), list(group.points), on_point=keep).run()
    return rows


def measure_to_file(cfg: SweepConfig, group: Group, path: str) -> int:
    """A Slurm array task: measure a group, appending each row to `path` as one JSON line
    (flushed and synced, so the driver reads whole rows only). Returns the rows written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as f:

        def write(row: dict[str, Any]) -> None:
            f.write(json.dumps(row, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())

        return len(measure(cfg, group, write))


class Requeueable:
    """A Slurm array task `fn(job, group, path)` that goes on where it stopped. submitit asks
    Slurm for a warning signal (SIGUSR2) a while before the time limit, and Slurm sends it on
    preemption too; submitit then calls `checkpoint` (it requeues only a task whose function
    has one), which resubmits the same task, and the task, started again, skips the points
    whose rows its file already holds (`rows_per_point` rows each)."""

    def __init__(self, fn: Callable[[Any, Group, str], int], rows_per_point: int = 1):
        self.fn, self.rows_per_point = fn, rows_per_point

    def __call__(self, job: Any, group: Group, path: str) -> int:
        done = whole_rows(Path(path)) // self.rows_per_point
        rest = Group(group.index, group.points[done:])
        return done * self.rows_per_point + (self.fn(job, rest, path) if rest.points else 0)

    def checkpoint(self, job: Any, group: Group, path: str) -> Any:
        helpers = importlib.import_module("submitit.helpers")
        return helpers.DelayedSubmission(self, job, group, path)


def whole_rows(path: Path) -> int:
    """The rows (whole lines) a task's file holds; a last line cut off by a kill is cut away,
    so the next row starts a line of its own."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    end = data.rfind(b"\n") + 1
    if end < len(data):
        os.truncate(path, end)
    return data[:end].count(b"\n")


# ---- fsc eval ------------------------------------------------------------------------------

@dataclass(frozen=True)
class EvalJob:
    """What every worker of an `fsc eval` grid needs: the grid and the device it runs on. A
    group's `points` are the prompt lengths it scores."""

    grid: EvalGrid
    device: str


def evaluate(job: EvalJob, group: Group) -> list[dict[str, Any]]:
    """Score a group's lengths in this process: one row per cell, as `fsc eval` stores it."""
    set_threads()
    device = "cuda:0" if job.device.startswith("cuda") else job.device
    grid = job.grid
    model = model_to_score(grid.checkpoint, device, grid.settings.seed, grid.ar, grid.changes)
    cells = score(model, load_tokenizer(grid.tokenizer, need_mask=not grid.ar), grid, list(group.points), device)
    return [c.columns() for c in cells]


def evaluate_to_file(job: EvalJob, group: Group, path: str) -> int:
    """A Slurm array task of an eval grid: its rows as JSON lines in `path`."""
    rows = evaluate(job, group)
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, default=str) + "\n" for r in rows))
        f.flush()
        os.fsync(f.fileno())
    return len(rows)
