"""`fsc profile`'s work once its request is checked (fsc.sweep.request): the sweep resolved on
this machine (its device, the default recipes and sizes, the points a resumed run still lacks
after storing what its Slurm tasks left), then listed with the cost model's predictions
(`dry_run`) or measured into a run (`profile`): in this process, in local worker processes, on
Ray or on Slurm (fsc.scale.executors), each point stored as it arrives.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from fsc import ops
from fsc.costmodel import DeviceSpec
from fsc.errors import UsageError
from fsc.loading import free_bytes
from fsc.profile import Sweep, device_spec_for
from fsc.provenance import environment
from fsc.recipe import Recipe
from fsc.scale import ExecutorSettings, Watch, executors, recording, work
from fsc.scale.contention import cpu_share, warning
from fsc.source import load_source_recipe
from fsc.store import Store
from fsc.sweep import (
    Point,
    SweepConfig,
    SweepRequest,
    default_sweep,
    plan,
    predict,
    rough_cpu_seconds,
    stored_keys,
    unchanged,
    unmeasured,
)
from fsc.sweep_results import PointResult, compare
from fsc.text import counted, printable


@dataclass
class Resolved:
    """A sweep as it runs on this machine: its settings with the device's defaults, every point
    of it, the ones still to measure, and the recipes they use."""

    cfg: SweepConfig
    points: list[Point]
    todo: list[Point]
    recipes: dict[str, Recipe]

    @property
    def stored(self) -> int:
        """Points a resumed run already holds."""
        return len(self.points) - len(self.todo)

    def rough_s(self) -> float | None:
        """Roughly how long the points left take on this CPU (None on a GPU)."""
        if self.cfg.device != "cpu":
            return None
        budget = self.cfg.memory_budget or free_bytes(self.cfg.device)
        return sum(rough_cpu_seconds(self.todo, self.cfg, budget))


@dataclass
class DryRun:
    """The points a sweep would measure, each with the cost model's bytes, whether they fit
    `budget_bytes` and, on a CPU, a rough time (`rough_s`, also their sum)."""

    device: str
    budget_bytes: int
    points: list[dict]
    rough_s: float | None
    stored: int  # points the resumed run already holds


@dataclass
class Profiled:
    """A measured sweep: its run, the store's file, and the rows in plan order."""

    run_id: str
    store: Path
    stored_before: int
    rows: list[PointResult]  # measured by this invocation
    run_rows: list[PointResult]  # every point of the run (a resumed one's earlier points too)
    comparison: list[dict]  # each recipe against the baseline (fsc.sweep_results.compare)


def resolve(request: SweepRequest, settings: ExecutorSettings, st: Store,
            watch: Watch, dry: bool = False) -> Resolved:
    """The sweep on this machine; for a resumed run, the rows its Slurm tasks wrote that no
    driver read are stored first (`dry`: counted as stored, neither stored nor marked read),
    and the points it holds are left out."""
    cfg = request.cfg
    device = executors.run_device(cfg.device, settings)
    cuda = torch.device(device).type == "cuda"
    if cfg.backend == "triton" and not cuda and not ops.interpreting():
        raise UsageError(f"--backend triton needs a CUDA device, not {device} (give --device "
                         "cuda, or --backend torch or auto)")
    recipes, S, B = default_sweep(device)
    cfg = replace(cfg, device=device, recipes=cfg.recipes or recipes, S=cfg.S or S,
                  B=cfg.B or B, repeats=cfg.repeats or (10 if cuda else 5))
    loaded = request.recipes | {r: load_source_recipe(r) for r in cfg.recipes
                                if r not in request.recipes}
    points, left_out = plan(cfg, loaded)
    for name, pairs in left_out.items():
        watch.say(f"{printable(name)}: (G, K) = {', '.join(map(str, pairs))} left out: K must "
                  "be at most G")
    todo = points
    if request.resume is not None:
        todo = unmeasured(points, _take_leftovers(st, request.resume, points, cfg, watch, dry),
                          cfg)
    return Resolved(cfg, points, todo, loaded)


def _take_leftovers(st: Store, run_id: str, points: list[Point], cfg: SweepConfig,
                    watch: Watch, dry: bool = False) -> dict[tuple, int]:
    """Store the rows Slurm tasks of `run_id` wrote that no driver read (it was killed): for
    each point key, as many as the plan has and the store lacks (`dry`: only count them, and
    leave their files unread). Returns the points the run holds then, by key."""
    have = stored_keys(st.point_keys(run_id))
    folder = executors.slurm_folder(st.dir, run_id)
    if not folder.is_dir():
        return have
    planned = Counter(p.key(cfg) for p in points)
    taken = 0
    for row in executors.leftovers(folder, mark_read=not dry):
        r = PointResult.from_columns(row)
        if have.get(r.key(), 0) < planned[r.key()]:
            if not dry:
                st.add_point(run_id, r.columns(), r.samples)
            have[r.key()] = have.get(r.key(), 0) + 1
            taken += 1
    if taken:
        watch.say(f"{counted(taken, 'point')} the run's Slurm tasks wrote "
                  + ("would be stored by the resume" if dry else "were stored"))
    return have


def dry_run(request: SweepRequest, settings: ExecutorSettings, st: Store,
            watch: Watch) -> DryRun:
    """The points the sweep would measure, with the cost model's memory against the budget
    and, on a CPU, a rough time; nothing is measured or recorded."""
    ops.check_tuning()  # as the run would: a setting no kernel takes is refused here too
    sweep = resolve(request, settings, st, watch, dry=True)
    cfg, todo = sweep.cfg, sweep.todo
    budget = cfg.memory_budget or free_bytes(cfg.device)
    listed = [{"recipe": p.recipe.name, "S": p.S, "B": p.B, "G": p.G, "K": p.K, "dtype": p.dtype,
               **predict(p, budget)} for p in todo]
    total_s = None
    if cfg.device == "cpu":
        for row, s in zip(listed, rough_cpu_seconds(todo, cfg, budget), strict=True):
            row["rough_s"] = s
        total_s = sum(r["rough_s"] for r in listed)
    return DryRun(cfg.device, budget, listed, total_s, sweep.stored)


def profile(request: SweepRequest, settings: ExecutorSettings, st: Store, command: str,
            threads: int, watch: Watch) -> Profiled:
    """Measure the sweep into a run of `st` (a new one, or the one it resumes), recorded as
    `command`, with `threads` torch threads a timing process; every point is stored as it
    arrives. A stop signal ends the run interrupted and raises fsc.interrupts.Stopped."""
    sweep = resolve(request, settings, st, watch)
    ops.check_tuning()  # recorded with the run: what no kernel takes is refused, any backend
    ops.use_backend(sweep.cfg.backend)
    cfg = replace(sweep.cfg, spec=_device_spec(sweep.cfg.device, request.bandwidth))
    engine = None
    if settings.remote:  # Ray is joined here: a cluster out of reach costs a line, not a run
        engine = executors.engine_for(settings, cfg.device.startswith("cuda"), work.measure,
                                      work.measure_to_file, watch.say)
    # processes timing points at once: this one, local workers, or a Ray cluster's CPUs
    lanes = settings.workers if engine is None else max(settings.workers, engine.lanes)
    here = engine is None or engine.here  # (Slurm's tasks and another machine's: not here)
    share = _cpu_share(cfg, lanes if here else None, len(sweep.todo), threads, watch)
    config = cfg.stored() | unchanged(cfg, sweep.recipes) | {
        "bandwidth": request.bandwidth, "executor": settings.executor,
        "workers": lanes, "cpu_share": share}
    total, before = len(sweep.points), sweep.stored
    with recording(st, "profile", command, config, recipes=list(sweep.recipes.values()),
                   environment=environment(cfg.device), resume=request.resume, before=before,
                   total=total) as run:
        run.interrupt_note = lambda name: (f"interrupted ({name}) after "
                                           f"{before + len(run.points)} of {total} points")
        if engine is None:
            runner = Sweep(cfg, sweep.todo, on_point=None)
        else:
            if hasattr(engine, "folder"):
                engine.folder = executors.slurm_folder(st.dir, run.run_id)
            runner = executors.Distributed(cfg, sweep.todo, engine, lanes)
        runner.on_point = lambda row: run.add_point(row.columns(), row.samples)
        runner.on_progress = watch.stored
        watch.started(run.run_id, total, before, sweep.rough_s())
        rows = runner.run()
    # a resumed run's tables (and baselines) are of every point it holds
    every = rows
    if before:
        every = run_points(st, run.run_id, sweep.points, cfg)
        failed = {(r.key(), r.error): r.traceback for r in rows if r.traceback}
        for r in every:  # a traceback is never stored: those of the points failed now
            r.traceback = failed.get((r.key(), r.error))
    # a baseline out of memory: which batch of it fits the budget the sweep had, and the
    # command that measures it as this sweep did
    free = free_bytes(cfg.device) if cfg.memory_budget is None and _here(cfg.device) else None
    refs = {recipe.name: ref for ref, recipe in sweep.recipes.items()}
    return Profiled(run.run_id, st.file, before, rows, every,
                    compare(every, memory_budget=cfg.memory_budget, free_bytes=free, refs=refs,
                            dtype=cfg.dtype))


def run_points(st: Store, run_id: str, plan: list[Point], cfg: SweepConfig) -> list[PointResult]:
    """Every point run `run_id` holds, in the plan's order (the points measured before a
    resume and those measured after it)."""
    cols, rows = st.query(f"SELECT * FROM profile_points WHERE run_id = '{run_id}' "
                          "ORDER BY point_id")
    found = [PointResult.from_columns(dict(zip(cols, r, strict=True))) for r in rows]
    order = {p.key(cfg): i for i, p in reversed(list(enumerate(plan)))}
    return sorted(found, key=lambda r: order.get(r.key(), len(order)))


def _device_spec(device: str, bandwidth: float | None) -> DeviceSpec | None:
    """The figures the floor uses: the device table's for a GPU here (a remote driver has none:
    each worker takes its own), with `bandwidth` (TB/s) in place of the table's when given."""
    spec = device_spec_for(torch.device(device)) if _here(device) else None
    if bandwidth is None:
        return spec
    return DeviceSpec(name=device, memory_bytes=spec.memory_bytes if spec else 0,
                      bandwidth_bytes_per_s=bandwidth * 1e12,
                      peak_flops=spec.peak_flops if spec else float("inf"))


def _here(device: str) -> bool:
    """Whether `device` is on this machine (a remote driver may have no GPU)."""
    return not device.startswith("cuda") or torch.cuda.is_available()


def _cpu_share(cfg: SweepConfig, lanes: int | None, points: int, threads: int,
               watch: Watch) -> dict | None:
    """How a CPU sweep of `points` points timed here by `lanes` processes at once shares the
    cores (fsc.scale.contention), said when they are oversubscribed; None for a GPU or
    another machine (`lanes` None). A process is started per group handed out, so no more
    processes time points than there are points."""
    if cfg.device != "cpu" or lanes is None:
        return None
    share = cpu_share(max(1, min(lanes, points)), threads)
    if share["contended"]:
        watch.say(warning(share))
    return share
