"""`fsc profile`: the main job: sweep recipes × S × B, record every point in the store.

The order of work makes mistakes cheap: every option is checked before torch is imported; the
store is created (or opened) before the first point is measured; Ctrl-C, SIGTERM, SIGUSR1 or
SIGUSR2 (fsc.interrupts) marks the run interrupted and says how to continue it, and `--resume RUN_ID` measures only the points the run
still lacks, under the same run id.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
from dataclasses import fields
from typing import Annotated

import typer

from fsc.blocks import MAX_G, block_setting
from fsc.cli.bounds import MAX_B, MAX_S, TB_S, between
from fsc.cli.common import (
    Backend,
    BackendOpt,
    Choice,
    DType,
    JsonOpt,
    Mode,
    SeedOpt,
    StoreOpt,
    err,
    finite,
    given_options,
    out,
    print_json,
    printable,
    store_dir,
    torch_device,
    torch_threads,
)
from fsc.cli.tables import WideOpt
from fsc.errors import UsageError

_SUFFIX = {"k": 2**10, "m": 2**20}
_UNITS = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "b": 1}
MIN_BUDGET = 2**20  # a --memory-budget below 1 MiB holds no model
MAX_BUDGET = 2**60
MAX_WARMUP = 1000
MAX_REPEATS = 10_000
_DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")
CPU_NOTICE_S = 60  # on a CPU, say how long a sweep will take when it is longer than this

# The options that shape a sweep: a resumed run takes all of them from its stored config.
SWEEP_OPTIONS = ("recipe", "S", "B", "G", "steps", "mode", "dtype", "backend", "warmup",
                 "repeats", "device", "memory_budget", "bandwidth", "seed")


class Executor(Choice):
    local = "local"
    ray = "ray"
    slurm = "slurm"


MAX_WORKERS = 1024
ExecutorOpt = Annotated[Executor, typer.Option(
    "--executor", help="Where points run: local (this machine; --workers processes), ray "
    "(a Ray cluster, pip install 'fsc[ray]') or slurm (job arrays through submitit, "
    "pip install 'fsc[slurm]').")]
WorkersOpt = Annotated[int, typer.Option(
    "--workers", callback=between(1, MAX_WORKERS),
    help="local: worker processes, one per visible GPU on CUDA (1: in this process). ray, "
    "slurm: cut the sweep into at least 2 × N groups (ray's default N: the cluster's GPUs, or "
    "CPUs; slurm's: one array task per recipe).")]
AddressOpt = Annotated[str, typer.Option(
    "--address", help="ray: the cluster, auto (a running one), ray://host:port, or local (a "
    "new one on this machine).")]
RetriesOpt = Annotated[int, typer.Option(
    "--retries", callback=between(0, 100),
    help="Times a group of points is run again after its worker died or failed; then its "
    "points are recorded as errors.")]
PartitionOpt = Annotated[str | None, typer.Option(
    "--slurm-partition", help="slurm: the partition (default: the cluster's).",
    show_default=False)]
GpusPerNodeOpt = Annotated[int, typer.Option(
    "--slurm-gpus-per-node", callback=between(0, 64), help="slurm: GPUs each array task asks for.")]
SlurmTimeOpt = Annotated[int, typer.Option(
    "--slurm-time", callback=between(1, 60 * 24 * 30), help="slurm: time limit of each array "
    "task, minutes.")]


SCALE_OPTIONS = ("executor", "workers", "address", "retries", "slurm_partition",
                 "slurm_gpus_per_node", "slurm_time")


def executor_settings(ctx: typer.Context) -> dict:
    """The command's executor options (SCALE_OPTIONS, as parsed), checked before anything is
    imported: options of another executor are refused, and so is an executor whose package is
    missing. `remote` says whether anything runs outside this process."""
    from fsc.scale import needs

    scale = {name: ctx.params[name] for name in SCALE_OPTIONS}
    scale["executor"] = executor = str(scale["executor"])
    address = scale["address"]
    own = {"local": (), "ray": ("address",),
           "slurm": ("slurm_partition", "slurm_gpus_per_node", "slurm_time")}
    foreign = [name for kind, names in own.items() if kind != executor
               for name in given_options(ctx, names)]
    if foreign:
        raise UsageError(f"{', '.join(foreign)} do not apply to --executor {executor}")
    if executor == "ray" and not re.fullmatch(r"auto|local|ray://[\w.\-]+:\d{1,5}|"
                                                   r"[\w.\-]+:\d{1,5}", address):
        raise UsageError(f"--address {address[:60]!r} is not auto, local, ray://HOST:PORT or "
                         "HOST:PORT")
    needs(executor)
    return scale | {"remote": executor != "local" or scale["workers"] > 1}


def parse_sizes(text: str, option: str, low: int, high: int) -> list[int]:
    """'1024,4096' or '1k,256k' -> [1024, 4096] (k = 1024, m = 2**20), each in [low, high]."""
    if not text.strip():
        raise UsageError(f"{option} is empty; give sizes such as 1024,4096 or 4k")
    values = []
    for part in text.split(","):
        p = part.strip().lower()
        mult = _SUFFIX.get(p[-1:], 1)
        digits = p[:-1] if mult > 1 else p
        if not re.fullmatch(r"[0-9]{1,12}", digits):
            raise UsageError(f"{option}: {part.strip()[:40]!r} is not an integer "
                             "(e.g. 1024,4096 or 4k)")
        v = int(digits) * mult
        if v < low:
            raise UsageError(f"{option}: {v} is below {low}")
        if v > high:
            raise UsageError(f"{option}: {v} is above {high}, the largest fsc takes")
        values.append(v)
    return values


def parse_bytes(text: str, option: str = "--memory-budget") -> int:
    """'2GiB', '512MiB', '1.5GB' or '1000000' (bytes) -> bytes, between 1 MiB and 1 EiB."""
    t = text.strip().lower()
    unit = next((u for u in _UNITS if t.endswith(u)), "")
    try:
        value = float(t[: len(t) - len(unit)]) * _UNITS.get(unit, 1)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"{option}: {text[:40]!r} is not a size (e.g. 2GiB, 512MiB or 1000000 "
                         "bytes)")
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise UsageError(f"{option}: {text[:40]!r} must be between 1MiB and 1EiB (a budget holds "
                         "a model's weights, cache and activations)")
    return int(value)


def _resume_command(run_id: str, store) -> str:
    where = f" --store {shlex.quote(str(store))}" if store is not None else ""
    return f"fsc profile --resume {run_id}{where}"


def profile(
    ctx: typer.Context,
    recipe: Annotated[list[str] | None, typer.Option(
        "--recipe", "-r", help="Recipe, shipped name, checkpoint dir or published model (config.json folder, hf:ORG/NAME); repeatable. Default: tiny "
        "attention/mamba/hybrid on CPU, the paper's 3B trio on a GPU.")] = None,
    S: Annotated[str | None, typer.Option(
        "--S", help=f"Context lengths, e.g. 1024,4096 or 4k,256k (k = 1024; at most {MAX_S}).",
        show_default=False)] = None,
    B: Annotated[str | None, typer.Option(
        "--B", help=f"Batch sizes, e.g. 1,4 (1 to {MAX_B}).", show_default=False)] = None,
    G: Annotated[str | None, typer.Option(
        "--G", help=f"Block sizes G, e.g. 1,8,32 (1 to {MAX_G}; default: each recipe's).",
        show_default=False)] = None,
    steps: Annotated[str | None, typer.Option(
        "--steps", help="Denoising steps K per block, e.g. 1,4 (1..G; default: G). Crossed with "
        "--G, pairs with K > G are left out.", show_default=False)] = None,
    mode: Annotated[Mode | None, typer.Option(
        "--mode", help="diffusion or ar (G 1, K 0: tokens/s = B / fold). Default: ar for recipes "
        "whose block size is 1.", show_default=False)] = None,
    dtype: Annotated[DType | None, typer.Option(
        "--dtype", help="Default: each recipe's.", show_default=False)] = None,
    backend: BackendOpt = Backend.auto,
    warmup: Annotated[int, typer.Option(
        "--warmup", callback=between(0, MAX_WARMUP),
        help=f"Untimed step+fold pairs per point (0 to {MAX_WARMUP}).")] = 2,
    repeats: Annotated[int | None, typer.Option(
        "--repeats", callback=between(1, MAX_REPEATS), show_default=False,
        help=f"Timed steps and folds per point, 1 to {MAX_REPEATS} (default 10 on a GPU, 5 on "
        "the CPU).")] = None,
    device: Annotated[str, typer.Option(
        "--device", help="auto (CUDA if present), cpu, cuda, cuda:1.")] = "auto",
    memory_budget: Annotated[str | None, typer.Option(
        "--memory-budget", help="Bytes a point may hold in all (weights, cache, activations), "
        "e.g. 2GiB or 512MiB, at least 1MiB; default: the device's free memory.",
        show_default=False)] = None,
    bandwidth: Annotated[float | None, typer.Option(
        "--bandwidth", callback=finite(*TB_S), show_default=False,
        help=f"Device bandwidth in TB/s for the floor ({TB_S[0]:g} to {TB_S[1]:g}; CPU has "
        "none).")] = None,
    seed: SeedOpt = 0,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="RUN_ID", show_default=False,
        help="Continue an interrupted or killed run: its own sweep, measuring only the points it "
        "lacks, under the same run id.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List the points with predicted memory; measure and record nothing.")
    ] = False,
    executor: ExecutorOpt = Executor.local,
    workers: WorkersOpt = 1,
    address: AddressOpt = "auto",
    retries: RetriesOpt = 1,
    slurm_partition: PartitionOpt = None,
    slurm_gpus_per_node: GpusPerNodeOpt = 1,
    slurm_time: SlurmTimeOpt = 60,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    wide: WideOpt = False,
) -> None:
    """Time step and fold over S and B for each recipe; record every point in the store.

    Ctrl-C or SIGTERM (or SIGUSR1/2) stops a sweep and keeps every finished point; `--resume
    RUN_ID` measures the rest.
    """
    # Everything a user can get wrong is checked before torch is imported: the options first,
    # before anything is imported at all.
    if resume is not None:
        given = given_options(ctx, SWEEP_OPTIONS)
        if given:
            raise UsageError(f"--resume {resume} continues the run's own sweep; drop "
                             f"{', '.join(given)}")
    else:
        if not _DEVICE.fullmatch(device):
            raise UsageError(f"--device {device[:40]!r} is not auto, cpu, cuda or cuda:N")
        options = dict(
            recipes=recipe or [], S=parse_sizes(S, "--S", 0, MAX_S) if S is not None else [],
            B=parse_sizes(B, "--B", 1, MAX_B) if B is not None else [],
            G=parse_sizes(G, "--G", 1, MAX_G) if G is not None else None,
            K=parse_sizes(steps, "--steps", 1, MAX_G) if steps is not None else None,
            mode=mode and str(mode), dtype=dtype and str(dtype), backend=str(backend),
            warmup=warmup, repeats=repeats or 0, device=device, seed=seed,
            memory_budget=parse_bytes(memory_budget) if memory_budget is not None else None)

    scale = executor_settings(ctx)

    from fsc.source import load_source_recipe
    from fsc.store import Store
    from fsc.sweep import SweepConfig, default_sweep, plan

    st = Store(store_dir(store))
    st.check(write=not dry_run)  # a path that cannot hold a store fails before any work
    if resume is not None:
        config = st.run_config(resume)
        options = {f.name: config[f.name] for f in fields(SweepConfig) if f.name in config}
        bandwidth = config.get("bandwidth")
    cfg = SweepConfig(**options)
    loaded = {r: load_source_recipe(r) for r in cfg.recipes}  # every recipe, before starting
    if resume is not None:
        _check_unchanged(resume, config, loaded)
    if loaded:  # a bad (mode, G, K) fails here, not after torch is imported
        plan(cfg, loaded)
    elif cfg.mode == "ar":  # the default recipes wait for the device; ar's rule needs none
        block_setting("ar", (cfg.G or [None])[0], (cfg.K or [None])[0])

    import torch

    cfg.device = run_device(cfg.device, scale["executor"], scale["remote"])
    cuda = torch.device(cfg.device).type == "cuda"
    d_recipes, d_S, d_B = default_sweep(cfg.device)
    cfg.recipes, cfg.S, cfg.B = cfg.recipes or d_recipes, cfg.S or d_S, cfg.B or d_B
    cfg.repeats = cfg.repeats or (10 if cuda else 5)
    loaded |= {r: load_source_recipe(r) for r in cfg.recipes if r not in loaded}
    points, left_out = plan(cfg, loaded)
    for name, pairs in left_out.items():
        err.print(f"{printable(name)}: (G, K) = {', '.join(map(str, pairs))} left out: K must "
                  "be at most G", markup=False, highlight=False)
    todo = points
    if resume is not None:
        from fsc.sweep import unmeasured

        _take_leftovers(st, resume, points, cfg)
        todo = unmeasured(points, st.point_keys(resume), cfg)
    if dry_run:
        _dry_run(todo, cfg, len(points), as_json)
        return
    _measure(cfg, points, todo, loaded, bandwidth, resume, store, st, as_json, scale, wide)


def run_device(device: str, executor: str, remote: bool) -> str:
    """The sweep's device. Points measured here (or in local workers) need it here; a Ray or
    Slurm driver may run where the GPUs are not (a login node): there `cuda` is taken as asked,
    and each worker runs on the one GPU it is given (cuda:0 in its own view)."""
    if executor == "local":
        resolved = torch_device(device)
        return "cuda:0" if remote and resolved.startswith("cuda") else resolved
    if device == "auto":
        import torch

        return "cuda:0" if torch.cuda.is_available() else "cpu"
    return "cuda:0" if device.startswith("cuda") else device


def slurm_folder(st, run_id: str):
    """Where a run's Slurm tasks write their rows: beside the store (shared storage)."""
    return st.dir / "slurm" / run_id


def _take_leftovers(st, run_id: str, points, cfg) -> None:
    """Store the rows Slurm tasks of `run_id` wrote that no driver read (it was killed): for
    each point key, as many as the plan has and the store lacks."""
    folder = slurm_folder(st, run_id)
    if not folder.is_dir():
        return
    from fsc.scale.executors import leftovers
    from fsc.scale.work import from_row

    planned: dict[tuple, int] = {}
    for p in points:
        planned[p.key(cfg)] = planned.get(p.key(cfg), 0) + 1
    have = st.point_keys(run_id)
    taken = 0
    for row in leftovers(folder):
        r = from_row(row)
        key = r.key()
        if have.get(key, 0) < planned.get(key, 0):
            st.add_point(run_id, _point_columns(r), r.samples)
            have[key] = have.get(key, 0) + 1
            taken += 1
    if taken:
        err.print(f"{taken} points the run's Slurm tasks wrote were stored", markup=False,
                  highlight=False)


def _point_columns(row) -> dict:
    point = row.columns()
    if point["mixer_backends"]:
        point["mixer_backends"] = json.dumps(point["mixer_backends"])
    return point


def _check_unchanged(run_id: str, config: dict, loaded: dict) -> None:
    """A resumed run measures what it measured before: the same recipes and kernel settings."""
    from fsc.kernels import TUNING_ENV

    for ref, recipe_hash in (config.get("recipe_hashes") or {}).items():
        now = loaded[ref].recipe_hash
        if now != recipe_hash:
            raise UsageError(f"--resume {run_id}: recipe {printable(ref, 80)} changed since the "
                             f"run began (hash {recipe_hash[:12]}, now {now[:12]})")
    tuning = os.environ.get(TUNING_ENV) or None
    if tuning != config.get("kernel_tuning"):
        raise UsageError(f"--resume {run_id}: the run measured with {TUNING_ENV}="
                         f"{printable(config.get('kernel_tuning') or '', 80)!r}; set it the same")


def _dry_run(todo, cfg, n_points: int, as_json: bool) -> None:
    """List the points the sweep would measure, with the cost model's memory against the budget
    and, on a CPU, a rough time; nothing is measured or recorded."""
    from fsc.cli.profile_render import duration, render_plan
    from fsc.loading import free_bytes
    from fsc.sweep import predict, rough_cpu_seconds

    budget = cfg.memory_budget or free_bytes(cfg.device)
    listed = [{"recipe": p.recipe.name, "S": p.S, "B": p.B, "G": p.G, "K": p.K, "dtype": p.dtype,
               **predict(p, budget)} for p in todo]
    if cfg.device == "cpu":
        for row, s in zip(listed, rough_cpu_seconds(todo, cfg, budget), strict=True):
            row["rough_s"] = s
    total_s = sum(r.get("rough_s", 0) for r in listed) if cfg.device == "cpu" else None
    if as_json:
        print_json({"dry_run": True, "device": cfg.device, "budget_bytes": budget,
                    "points": listed, "rough_s": total_s})
        return
    skipped = f", {n_points - len(todo)} already stored" if n_points > len(todo) else ""
    about = f", roughly {duration(total_s)} on this CPU" if total_s is not None else ""
    render_plan(listed, f"dry run: {len(listed)} points on {cfg.device}{skipped}{about}; nothing "
                        "is measured or recorded", out)


def _measure(cfg, points, todo, loaded, bandwidth, resume, store, st, as_json, scale,
             wide: bool = False) -> None:
    """Register, run and close the sweep; print its results."""
    import torch

    from fsc import ops
    from fsc.cli.profile_render import duration, render_rows
    from fsc.costmodel import DeviceSpec
    from fsc.kernels import TUNING_ENV
    from fsc.loading import free_bytes
    from fsc.profile import Sweep, device_spec_for
    from fsc.provenance import environment
    from fsc.scale import executors
    from fsc.sweep import compare, rough_cpu_seconds

    ops.use_backend(cfg.backend)
    share = _cpu_share(cfg, scale, torch_threads())
    here = not cfg.device.startswith("cuda") or torch.cuda.is_available()
    spec = device_spec_for(torch.device(cfg.device)) if here else None  # else: each worker's
    if bandwidth is not None:
        spec = DeviceSpec(name=cfg.device, memory_bytes=spec.memory_bytes if spec else 0,
                          bandwidth_bytes_per_s=bandwidth * 1e12,
                          peak_flops=spec.peak_flops if spec else float("inf"))
    cfg.spec = spec
    engine = _engine(cfg, scale)
    for r in loaded.values():
        st.register_recipe(r.name, r.recipe_hash, r.to_yaml(), r.layer_plan)
    env_id = st.register_environment(environment(cfg.device))
    if resume is None:
        config = cfg.stored() | {
            "bandwidth": bandwidth,
            "kernel_tuning": os.environ.get(TUNING_ENV) or None,  # the kernels' launch choices
            "recipe_hashes": {ref: loaded[ref].recipe_hash for ref in cfg.recipes},
            "executor": scale["executor"], "workers": scale["workers"], "cpu_share": share,
        }
        run_id = st.start_run("profile", " ".join(["fsc", *sys.argv[1:]]), env_id, config)
    else:
        st.resume_run(resume, env_id)
        run_id = resume
    if cfg.device == "cpu":
        rough = sum(rough_cpu_seconds(todo, cfg, cfg.memory_budget or free_bytes(cfg.device)))
        if rough > CPU_NOTICE_S:
            err.print(f"{len(todo)} points, roughly {duration(rough)} on this CPU (large recipes "
                      "are slow here); --dry-run lists them, Ctrl-C stops and --resume continues",
                      markup=False, highlight=False)
    if engine is not None and hasattr(engine, "folder"):
        engine.folder = slurm_folder(st, run_id)
    sweep = Sweep(cfg, todo, on_point=None) if engine is None else executors.Distributed(
        cfg, todo, engine, max(scale["workers"], engine.lanes))
    rows = _run(sweep, st, run_id, len(points), len(points) - len(todo),
                _resume_command(run_id, store))
    if as_json:
        print_json({"run_id": run_id, "store": str(st.file),
                    "points_stored_before": len(points) - len(todo),
                    "points": [r.columns() for r in rows],
                    "comparison": compare(rows)})
        return
    follow_up = f"fsc query \"select * from profile where run_id = '{run_id}'\""
    if store is not None:
        follow_up += f" --store {shlex.quote(str(store))}"
    render_rows(rows, run_id, str(st.file), follow_up, out, err, wide)


def _engine(cfg, scale: dict):
    """What runs the points when not this process (see fsc.scale.executors.engine_for)."""
    if not scale["remote"]:
        return None
    from fsc.scale import executors, work

    return executors.engine_for(scale, cfg.device.startswith("cuda"), work.measure,
                                work.measure_to_file, _say)


def _cpu_share(cfg, scale: dict, threads: int) -> dict | None:
    """How a CPU sweep timed here shares the cores (fsc.scale.contention), said when they are
    oversubscribed; None for a GPU or another machine."""
    if cfg.device != "cpu" or scale["executor"] != "local":
        return None
    from fsc.scale.contention import cpu_share, warning

    share = cpu_share(scale["workers"], threads)
    if share["contended"]:
        _say(warning(share))
    return share


def _say(text: str) -> None:
    err.print(text, markup=False, highlight=False, soft_wrap=True)


def _run(sweep, st, run_id: str, total: int, stored_before: int, resume_command: str) -> list[dict]:
    """Run the sweep with a progress bar on stderr, writing each point as it finishes; close
    the run as finished, failed or interrupted. On Ctrl-C or another stop signal (see
    fsc.interrupts), say how many points are kept and how to continue, and exit 128 + its
    number."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from fsc.cli.common import bar_text
    from fsc.interrupts import StopSignals, exit_code, signal_name, signum_of

    kept = stored_before
    stored: list[int] = []  # point ids: finish_run checks each is there

    with StopSignals() as interrupts:

        def record(row) -> None:
            nonlocal kept
            with interrupts.held():
                stored.append(st.add_point(run_id, _point_columns(row), row.samples))
                kept += 1

        sweep.on_point = record
        try:
            with Progress(bar_text(), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=err, transient=False) as bar:
                task = bar.add_task(f"profile {run_id}", total=total, completed=stored_before)

                def advance(row) -> None:
                    status = f"{row.step_ms:.2f} ms/step" if row.status == "ok" else row.status
                    bar.update(task, advance=1, description=(
                        f"{printable(row.recipe, 60)} S={row.S} B={row.B}: {status}"))

                sweep.on_progress = advance
                rows = sweep.run()
        except KeyboardInterrupt as e:
            signum = signum_of(e)
            with interrupts.held():
                st.finish_run(run_id, "interrupted", f"interrupted ({signal_name(signum)}) after "
                              f"{kept} of {total} points", stored)
            print(f"interrupted: {kept} of {total} points of run {run_id} are stored; "
                  "continue with:", file=sys.stderr)
            print(f"  {resume_command}", file=sys.stderr)
            raise typer.Exit(exit_code(signum)) from None
        except BaseException as e:
            st.finish_run(run_id, "failed", f"{type(e).__name__}: {e}")
            raise
    st.finish_run(run_id, "finished", points=stored)
    return rows


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
