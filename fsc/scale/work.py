"""The unit of work an executor hands to a worker: a group of sweep points of one recipe,
measured in the worker's process with the worker's device, returned (or written) as plain rows.

A row is a dict: the profile_points columns plus `samples` and `traceback`, with datetimes as
ISO text, so it crosses a process pool, a Ray object store or a JSON-lines file unchanged and
becomes the same PointResult on the driver.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

from fsc import ops
from fsc.profile import Sweep
from fsc.sweep import Point, PointResult, SweepConfig

_DATES = ("started_at", "ended_at")
_FIELDS = {f.name for f in fields(PointResult)}


@dataclass(frozen=True)
class Group:
    """Points of one recipe, in sweep order: a model is built once for all of them."""

    index: int
    points: tuple[Point, ...]

    @property
    def ref(self) -> str:
        return self.points[0].ref


def groups(points: list[Point], workers: int) -> list[Group]:
    """The points by recipe, each recipe's run cut into contiguous pieces so that there are at
    least `workers` groups where the points allow (a piece builds its model once)."""
    by_ref: dict[str, list[Point]] = {}
    for p in points:
        by_ref.setdefault(p.ref, []).append(p)
    pieces = [list(v) for v in by_ref.values()]
    while len(pieces) < workers:
        largest = max(pieces, key=len)
        if len(largest) < 2:
            break
        i = pieces.index(largest)
        half = len(largest) // 2
        pieces[i:i + 1] = [largest[:half], largest[half:]]
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
    threads = int(os.environ.get("FSC_THREADS", "1") or 1)
    torch.set_num_threads(max(1, threads))
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
