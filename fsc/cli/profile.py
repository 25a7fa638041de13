"""`fsc profile`: the main job: sweep recipes × S × B, record every point in the store."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import typer

from fsc.cli.common import (
    BackendOpt,
    JsonOpt,
    StoreOpt,
    err,
    fmt_bytes,
    out,
    print_json,
    store_dir,
    torch_device,
    torch_threads,
)
from fsc.errors import UsageError

_SUFFIX = {"k": 2**10, "m": 2**20}


def parse_sizes(text: str, what: str, minimum: int) -> list[int]:
    """'1024,4096' or '1k,256k' -> [1024, 4096] (k = 1024)."""
    values = []
    for part in text.split(","):
        p = part.strip().lower()
        mult = _SUFFIX.get(p[-1:], 1)
        try:
            v = int(p[:-1] if mult > 1 else p) * mult
        except ValueError:
            raise UsageError(f"{what}: {part.strip()!r} is not an integer (e.g. 1024,4096 or 4k)") from None
        if v < minimum:
            raise UsageError(f"{what}: {v} is below {minimum}")
        values.append(v)
    return values


def parse_bytes(text: str) -> int:
    units = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "b": 1}
    t = text.strip().lower()
    for u, m in units.items():
        if t.endswith(u):
            num, mult = t[: -len(u)], m
            break
    else:
        num, mult = t, 1
    try:
        return int(float(num) * mult)
    except ValueError:
        raise UsageError(f"--memory-budget: {text!r} is not a size (e.g. 2GiB, 512MiB, 1000000)") from None


def profile(
    recipe: Annotated[
        list[str] | None,
        typer.Option("--recipe", "-r", help="Recipe, shipped name or checkpoint dir; repeatable. "
                     "Default: tiny attention/mamba/hybrid on CPU, the paper's 3B trio on a GPU."),
    ] = None,
    S: Annotated[str | None, typer.Option("--S", help="Context lengths, e.g. 1024,4096 or 4k,256k.")] = None,
    B: Annotated[str | None, typer.Option("--B", help="Batch sizes, e.g. 1,4.")] = None,
    G: Annotated[str | None, typer.Option("--G", help="Block sizes G, e.g. 1,8,32 (default: each recipe's).")] = None,
    steps: Annotated[str | None, typer.Option("--steps", help="Denoising steps K per block, e.g. 1,4 (default: G).")] = None,
    mode: Annotated[
        str | None, typer.Option("--mode", help="diffusion or ar (G 1, K 0: tokens/s = B / fold). "
                                 "Default: ar for recipes whose block size is 1.")
    ] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="bf16, fp16 or fp32 (default: recipe's).")] = None,
    backend: BackendOpt = "auto",
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed step+fold pairs per point.")] = 2,
    repeats: Annotated[
        int | None, typer.Option("--repeats", help="Timed steps and folds per point (default 10 on "
                                 "a GPU, 5 on the CPU).")
    ] = None,
    device: Annotated[str, typer.Option("--device", help="auto (CUDA if present), cpu, cuda, cuda:1.")] = "auto",
    memory_budget: Annotated[
        str | None, typer.Option("--memory-budget", help="Bytes a point may allocate (default: free memory).")
    ] = None,
    bandwidth: Annotated[
        float | None, typer.Option("--bandwidth", help="Device bandwidth in TB/s for the floor (CPU has none).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of weights, caches and tokens.")] = 0,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Time step and fold over S and B for each recipe; record every point in the store."""
    import torch

    from fsc import ops
    from fsc.costmodel import DeviceSpec
    from fsc.kernels import TUNING_ENV
    from fsc.profile import Sweep, SweepConfig, default_sweep, device_spec_for
    from fsc.provenance import environment
    from fsc.recipe import DTYPE_BYTES
    from fsc.source import load_source_recipe
    from fsc.store import Store

    device = torch_device(device)
    if mode is not None and mode not in ("diffusion", "ar"):
        raise UsageError(f"--mode {mode!r} is not one of diffusion, ar")
    if mode == "ar" and (G or steps):
        raise UsageError("--mode ar decodes with G 1 and no denoising steps; drop --G and --steps")
    if dtype is not None and dtype not in DTYPE_BYTES:
        raise UsageError(f"--dtype {dtype!r} is not one of {', '.join(DTYPE_BYTES)}")
    ops.use_backend(backend)
    torch_threads()
    repeats = repeats or (10 if torch.device(device).type == "cuda" else 5)
    if warmup < 0 or repeats < 1:
        raise UsageError("need --warmup >= 0 and --repeats >= 1")
    d_recipes, d_S, d_B = default_sweep(device)
    recipes = recipe or d_recipes
    loaded = {r: load_source_recipe(r) for r in recipes}  # validate every recipe before starting
    spec = device_spec_for(torch.device(device))
    if bandwidth is not None:
        if bandwidth <= 0:
            raise UsageError(f"--bandwidth {bandwidth} must be positive (TB/s)")
        spec = DeviceSpec(name=device, memory_bytes=spec.memory_bytes if spec else 0,
                          bandwidth_bytes_per_s=bandwidth * 1e12,
                          peak_flops=spec.peak_flops if spec else float("inf"))
    cfg = SweepConfig(
        recipes=recipes, S=parse_sizes(S, "--S", 0) if S else d_S,
        B=parse_sizes(B, "--B", 1) if B else d_B, G=parse_sizes(G, "--G", 1) if G else None,
        K=parse_sizes(steps, "--steps", 1) if steps else None, mode=mode, dtype=dtype, backend=backend,
        warmup=warmup, repeats=repeats, device=device, seed=seed,
        memory_budget=parse_bytes(memory_budget) if memory_budget else None, spec=spec,
    )
    st = Store(store_dir(store))
    for r in loaded.values():
        st.register_recipe(r.name, r.recipe_hash, r.to_yaml(), r.layer_plan)
    env_id = st.register_environment(environment(device))
    config = {k: v for k, v in vars(cfg).items() if k not in ("spec", "extra")}
    config["kernel_tuning"] = os.environ.get(TUNING_ENV) or None  # the kernels' launch choices
    run_id = st.start_run("profile", " ".join(["fsc", *sys.argv[1:]]), env_id, config)

    def record(row: dict) -> None:
        point = {k: v for k, v in row.items() if k not in ("samples", "traceback")}
        point["mixer_backends"] = json.dumps(point.get("mixer_backends")) if point.get("mixer_backends") else None
        st.add_point(run_id, point, row.get("samples"))

    sweep = Sweep(cfg, record)
    rows = _run_with_progress(sweep, sweep.size(loaded), run_id, st)
    if as_json:
        print_json({"run_id": run_id, "store": str(st.file),
                    "points": [{k: v for k, v in r.items() if k not in ("samples", "traceback")}
                               for r in rows],
                    "comparison": compare(rows)})
        return
    _render(rows, run_id, str(st.file))


def _run_with_progress(sweep, total: int, run_id: str, st) -> list[dict]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=False) as bar:
        task = bar.add_task(f"profile {run_id}", total=total)

        def advance(row):
            status = row["status"] if row["status"] != "ok" else f"{row['step_ms']:.2f} ms/step"
            bar.update(task, advance=1,
                       description=f"{row['recipe']} S={row['S']} B={row['B']}: {status}")

        sweep.on_progress = advance
        try:
            rows = sweep.run()
        except KeyboardInterrupt:
            st.finish_run(run_id, "interrupted")
            raise
        except BaseException as e:
            st.finish_run(run_id, "failed", f"{type(e).__name__}: {e}")
            raise
    st.finish_run(run_id, "finished")
    return rows


def _baseline(rows: list[dict]) -> str:
    """The recipe others are compared with: the all-attention one if any, else the first."""
    for r in rows:
        if set(r["layer_plan"]) == {"attention"}:
            return r["recipe"]
    return rows[0]["recipe"]


def compare(rows: list[dict]) -> list[dict]:
    """At each (S, B, G, K): latency ×, memory × and throughput × of every recipe versus the
    baseline (× > 1: better than the baseline)."""
    if not rows:
        return []
    base_name = _baseline(rows)

    def key(r):
        return r["S"], r["B"], r["G"], r["K"]

    by = {(r["recipe"], *key(r)): r for r in rows}
    result = []
    for r in rows:
        if r["recipe"] == base_name or r["status"] != "ok":
            continue
        base = by.get((base_name, *key(r)))
        ok = base is not None and base["status"] == "ok"
        result.append({
            "S": r["S"], "B": r["B"], "G": r["G"], "K": r["K"], "recipe": r["recipe"],
            "baseline": base_name,
            "latency_x": base["step_ms"] / r["step_ms"] if ok else None,
            "memory_x": base["peak_bytes"] / r["peak_bytes"] if ok else None,
            "throughput_x": r["tokens_per_s"] / base["tokens_per_s"] if ok else None,
            "baseline_status": base["status"] if base else "-",
        })
    return sorted(result, key=lambda c: (c["G"], c["K"], c["B"], c["S"], c["recipe"]))


def _render(rows: list[dict], run_id: str, store_file: str) -> None:
    from rich.table import Table

    t = Table(title=f"profile {run_id}: " + ", ".join(sorted({f"{r['dtype']} on {r['device']}" for r in rows})))
    cols = ["recipe", "S", "B", "G", "K", "step ms", "p10–p90", "fold ms", "tok/s", "peak", "cache",
            "GB/s", "floor ms", "roofline"]
    for col in cols:
        t.add_column(col, justify="left" if col == "recipe" else "right")
    for r in rows:
        head = [r["recipe"], str(r["S"]), str(r["B"]), str(r["G"]), str(r["K"])]
        if r["status"] != "ok":
            t.add_row(*head, f"[red]{r['status']}", "", "", "", "", fmt_bytes(r["cache_bytes"]), "", "", "")
            continue
        t.add_row(
            *head, f"{r['step_ms']:.3f}",
            f"{r['step_ms_p10']:.2f}–{r['step_ms_p90']:.2f}", f"{r['fold_ms']:.3f}",
            f"{r['tokens_per_s']:.0f}", fmt_bytes(r.get("peak_bytes")), fmt_bytes(r["cache_bytes"]),
            f"{r['achieved_gbps']:.1f}" if r.get("achieved_gbps") else "-",
            f"{r['floor_ms']:.3f}" if r.get("floor_ms") else "-",
            f"{100 * r['roofline_fraction']:.0f}%" if r.get("roofline_fraction") else "-",
        )
    out.print(t)
    backends = sorted({f"{k}:{v}" for r in rows for k, v in (r.get("mixer_backends") or {}).items()})
    if backends:
        out.print(f"[dim]kernels ran: {', '.join(backends)}[/]")
    comp = compare(rows)
    if comp:
        c = Table(title=f"versus {comp[0]['baseline']} (× > 1: better than the baseline)")
        for col in ("S", "B", "G", "K", "recipe", "latency ×", "memory ×", "throughput ×"):
            c.add_column(col, justify="left" if col == "recipe" else "right")
        for x in comp:
            cells = [f"{x[k]:.2f}×" if x[k] is not None else f"baseline {x['baseline_status']}"
                     for k in ("latency_x", "memory_x", "throughput_x")]
            c.add_row(str(x["S"]), str(x["B"]), str(x["G"]), str(x["K"]), x["recipe"], *cells)
        out.print(c)
    for r in rows:
        if r["status"] != "ok":
            err.print(f"[red]{r['status']}[/] {r['recipe']} S={r['S']} B={r['B']} G={r['G']} K={r['K']}: "
                      f"{r['error']}", markup=True, highlight=False)
    out.print(f"[dim]{len(rows)} points recorded in {store_file} (run {run_id}); "
              f"query them with: fsc query \"select * from profile where run_id = '{run_id}'\"[/]")


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
