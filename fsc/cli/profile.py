"""`fsc profile`: the main job: sweep recipes × S × B, record every point in the store.

The order of work makes mistakes cheap: every option is checked, and every recipe loaded,
before torch is imported (fsc.sweep.request); the store is created (or opened) before the first
point is measured; Ctrl-C, SIGTERM, SIGUSR1 or SIGUSR2 (fsc.interrupts) marks the run
interrupted and says how to continue it, and `--resume RUN_ID` measures only the points the run
still lacks, under the same run id. The work itself is fsc.scale.profiling.
"""

from __future__ import annotations

import os
import re
from typing import Annotated

import typer

from fsc.blocks import CPU_DEFAULT_B, CPU_DEFAULT_S, GPU_DEFAULT_B, GPU_DEFAULT_S, MAX_G
from fsc.cli.bounds import MAX_B, MAX_S, TB_S, between, joined, listed, parse_bytes, parse_sizes
from fsc.cli.common import (
    MAX_SEED,
    Backend,
    BackendOpt,
    DType,
    JsonOpt,
    Mode,
    StoreOpt,
    command_line,
    err,
    finite,
    given_options,
    out,
    print_json,
    say,
    stopped_run,
    store_dir,
    store_option,
    torch_threads,
)
from fsc.cli.executors import with_executor_options
from fsc.cli.tables import WideOpt
from fsc.errors import UsageError
from fsc.scale import ExecutorSettings

MAX_WARMUP = 1000
MAX_REPEATS = 10_000
_DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")
CPU_NOTICE_S = 60  # on a CPU, say how long a sweep will take when it is longer than this

# The options that shape a sweep: a resumed run takes all of them from its stored config.
SWEEP_OPTIONS = ("recipe", "S", "B", "G", "steps", "mode", "dtype", "backend", "warmup",
                 "repeats", "device", "memory_budget", "bandwidth", "seed", "no_graphs")


def _k(sizes: list[int]) -> str:
    """Sizes as --S and --B take them (4k for 4096)."""
    return ",".join(f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n) for n in sizes)


def _resume_command(run_id: str, store) -> str:
    return f"fsc profile --resume {run_id}{store_option(store)}"


@with_executor_options
def profile(
    ctx: typer.Context,
    recipe: Annotated[list[str] | None, typer.Option(
        "--recipe", "-r", help="Recipe, shipped name, checkpoint dir or published model (config.json folder, hf:ORG/NAME); repeatable. Default: tiny "
        "attention/mamba/hybrid on CPU, the paper's 3B trio on a GPU.")] = None,
    S: listed("--S", "Context lengths, e.g. 1024,4096 or 4k,256k (k = 1024; at most "
              f"{MAX_S}). Default: {_k(CPU_DEFAULT_S)} on CPU, {_k(GPU_DEFAULT_S)} on a "
              "GPU.") = None,
    B: listed("--B", f"Batch sizes, e.g. 1,4 (1 to {MAX_B}). Default: {_k(CPU_DEFAULT_B)} on "
              f"CPU, {_k(GPU_DEFAULT_B)} on a GPU.") = None,
    G: listed("--G", f"Block sizes G, e.g. 1,8,32 (1 to {MAX_G}; default: each recipe's).") = None,
    steps: listed("--steps", "Denoising steps K per block, e.g. 1,4 (1..G; default: G); crossed "
                  "with --G, pairs with K > G are left out.") = None,
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
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help=(
        "Seed of a recipe's random weights, the cache's contents and the timed "
        "tokens."))] = 0,
    no_graphs: Annotated[bool, typer.Option(
        "--no-graphs", help="On CUDA, time steps and folds issued op by op from Python rather "
        "than replayed from CUDA graphs (what an eager decoder pays).")] = False,
    resume: Annotated[str | None, typer.Option(
        "--resume", metavar="RUN_ID", show_default=False,
        help="Continue an interrupted or killed run (its id, the first characters of the id or "
        "of its tail, or latest): its own sweep, measuring only the points it lacks, under the "
        "same run id.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List the points with predicted memory; measure and record nothing.")
    ] = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    wide: WideOpt = False,
    *,
    scale: ExecutorSettings,
) -> None:
    """Time step and fold over S and B for each recipe; record every point in the store.

    Ctrl-C or SIGTERM (or SIGUSR1/2) stops a sweep and keeps every finished point; `--resume
    RUN_ID` measures the rest.
    """
    # Everything a user can get wrong is checked before torch is imported.
    from fsc.sweep import SweepConfig, request

    cfg = None
    if resume is not None:
        given = given_options(ctx, SWEEP_OPTIONS)
        if given:
            raise UsageError(f"--resume {resume} continues the run's own sweep; drop "
                             f"{', '.join(given)}")
    else:
        if not _DEVICE.fullmatch(device):
            raise UsageError(f"--device {device[:40]!r} is not auto, cpu, cuda or cuda:N")
        from fsc.source import located_ref

        S, B, G, steps = joined(S, B, G, steps)
        cfg = SweepConfig(
            recipes=[located_ref(r) for r in recipe or []],  # (each list: every time given)
            S=parse_sizes(S, "--S", 0, MAX_S) if S is not None else [],
            B=parse_sizes(B, "--B", 1, MAX_B) if B is not None else [],
            G=parse_sizes(G, "--G", 1, MAX_G) if G is not None else None,
            K=parse_sizes(steps, "--steps", 1, MAX_G) if steps is not None else None,
            mode=mode and str(mode), dtype=dtype and str(dtype), backend=str(backend),
            warmup=warmup, repeats=repeats or 0, device=device, seed=seed,
            memory_budget=parse_bytes(memory_budget) if memory_budget is not None else None,
            graphs=not no_graphs)

    from fsc.store import Store

    st = Store(store_dir(store))
    st.check(write=True)  # a path that cannot hold a store fails before any work, or a dry run
    if resume is not None:  # a prefix of the id, or `latest`
        from fsc.store.run_ids import resolve_run

        resume = resolve_run(st, resume, "profile", "--resume")
    asked = request(st, cfg, bandwidth, resume)

    from fsc.scale import Watch, profiling

    if dry_run:
        torch_threads()  # $FSC_THREADS checked as the run checks it
        _show_dry_run(profiling.dry_run(asked, scale, st, Watch(say=say)), as_json)
        return
    _measure(asked, scale, st, store, as_json, wide)


def _show_dry_run(dry, as_json: bool) -> None:
    from fsc.cli.profile_render import render_dry_run

    if as_json:
        print_json({"dry_run": True, "device": dry.device, "budget_bytes": dry.budget_bytes,
                    "points_stored_before": dry.stored, "points": dry.points,
                    "rough_s": dry.rough_s})
        return
    render_dry_run(dry, out)


def _measure(asked, scale: ExecutorSettings, st, store, as_json: bool, wide: bool) -> None:
    """Run the sweep with a progress bar on stderr and print its results. On Ctrl-C or another
    stop signal (see fsc.interrupts), say how many points are kept and how to continue, and
    exit 128 + its number."""
    from fsc.cli.profile_render import SweepBar, render_rows
    from fsc.interrupts import Stopped
    from fsc.scale import Watch, profiling

    command = command_line()
    try:
        with SweepBar(CPU_NOTICE_S) as bar:
            done = profiling.profile(asked, scale, st, command, torch_threads(),
                                     Watch(say=say, started=bar.start, stored=bar.advance))
    except Stopped as e:
        raise typer.Exit(stopped_run(e, f"{e.kept} of {e.total} points of run {e.run_id} are "
                                     "stored", _resume_command(e.run_id, store), as_json)) from None
    if store is not None:  # the command that measures a baseline writes where this run did
        for x in done.comparison:
            if x.get("baseline_command"):
                x["baseline_command"] += store_option(store)
    if as_json:  # every point the run holds, as the table shows them (a resume's too)
        print_json({"run_id": done.run_id, "store": str(done.store),
                    "points_stored_before": done.stored_before,
                    "points_measured_now": len(done.rows),
                    "points": [r.columns() for r in done.run_rows],
                    "comparison": done.comparison})
        return
    follow_up = f"fsc query \"select * from profile where run_id = '{done.run_id}'\""
    if store is not None:
        follow_up += store_option(store)
    render_rows(done.run_rows, done.run_id, str(done.store), follow_up, out, err, wide,
                done.comparison, debug=os.environ.get("FSC_DEBUG") == "1",
                measured_now=len(done.rows) if done.stored_before else None)


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
