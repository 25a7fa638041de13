"""The unit of work an executor hands to a worker: a group of sweep points of one recipe,
measured in the worker's process with the worker's device, returned (or written) as plain rows.

A row is a dict: the profile_points columns plus `samples` and `traceback`, with datetimes as
ISO text, so it crosses a process pool, a Ray object store or a JSON-lines file unchanged and
becomes the same PointResult on the driver.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

from fsc import ops
from fsc.loading import set_threads
from fsc.profile import Sweep
from fsc.sweep import Point, PointResult, SweepConfig
from fsc.tokenizer import load_tokenizer
from fsc.train.data import DataOptions
from fsc.train.evaluate import EvalSettings, heldout_loss, model_to_score, mqar, niah

_DATES = ("started_at", "ended_at")
_FIELDS = {f.name for f in fields(PointResult)}


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
    row = {f: getattr(r, f) for f in _FIELDS}
    for k in _DATES:
        if row[k] is not None:
            row[k] = row[k].isoformat()
    return row


def from_row(row: dict[str, Any]) -> PointResult:
    row = dict(row)
    for k in _DATES:
        if isinstance(row.get(k), str):
            row[k] = datetime.fromisoformat(row[k])
    return PointResult(**{k: v for k, v in row.items() if k in _FIELDS})


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
    """What every worker of an `fsc eval` grid needs: the checkpoint and the cells' settings.
    A group's `points` are the prompt lengths it scores."""

    source: str
    task: str  # niah | mqar | loss
    depths: tuple[float, ...]
    pairs: tuple[int, ...]
    settings: EvalSettings
    digits: int | None  # None: the default for G
    device: str
    tokenizer: str | None
    data: str | None
    options: DataOptions
    ar: bool  # decode a G > 1 checkpoint at G = 1


def evaluate(job: EvalJob, group: Group) -> list[dict[str, Any]]:
    """Score a group's lengths in this process: one row per cell, as `fsc eval` stores it."""
    set_threads()
    device = "cuda:0" if job.device.startswith("cuda") else job.device
    tok = load_tokenizer(job.tokenizer)
    model = model_to_score(job.source, device, job.settings.seed, job.ar)
    lengths = list(group.points)
    with torch.no_grad():
        if job.task == "niah":
            return niah(model, tok, lengths, list(job.depths), job.settings, job.digits, device)
        if job.task == "mqar":
            return mqar(model, tok, lengths, list(job.pairs), job.settings, device)
        return [row for n in lengths for row in heldout_loss(model, tok, job.data, n, job.settings,
                                                             job.options, device)]


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
