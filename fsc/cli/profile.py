"""`fsc profile`: the main job: sweep recipes × S × B, record every point in the store."""

from __future__ import annotations

import json
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
    G: Annotated[int | None, typer.Option("--G", help="Block size G (default: each recipe's).")] = None,
    steps: Annotated[int | None, typer.Option("--steps", help="Denoising steps K per block (default G).")] = None,
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
    from fsc.profile import Sweep, SweepConfig, default_sweep, device_spec_for
    from fsc.provenance import environment
    from fsc.recipe import DTYPE_BYTES
    from fsc.source import load_source_recipe
    from fsc.store import Store

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise UsageError(f"--device {device}: no CUDA device is available")
    if dtype is not None and dtype not in DTYPE_BYTES:
        raise UsageError(f"--dtype {dtype!r} is not one of {', '.join(DTYPE_BYTES)}")
    ops.use_backend(backend)
    torch_threads()
    repeats = repeats or (10 if torch.device(device).type == "cuda" else 5)
    if warmup < 0 or repeats < 1:
        raise UsageError("need --warmup >= 0 and --repeats >= 1")
    for name, v in (("--G", G), ("--steps", steps)):
        if v is not None and v < 1:
            raise UsageError(f"{name} {v} must be at least 1")
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
        B=parse_sizes(B, "--B", 1) if B else d_B, G=G, K=steps, dtype=dtype, backend=backend,
        warmup=warmup, repeats=repeats, device=device, seed=seed,
        memory_budget=parse_bytes(memory_budget) if memory_budget else None, spec=spec,
    )
    st = Store(store_dir(store))
    for r in loaded.values():
        st.register_recipe(r.name, r.recipe_hash, r.to_yaml(), r.layer_plan)
    env_id = st.register_environment(environment(device))
    config = {k: v for k, v in vars(cfg).items() if k not in ("spec", "extra")}
    run_id = st.start_run("profile", " ".join(["fsc", *sys.argv[1:]]), env_id, config)

    def record(row: dict) -> None:
        point = {k: v for k, v in row.items() if k not in ("samples", "traceback")}
        point["mixer_backends"] = json.dumps(point.get("mixer_backends")) if point.get("mixer_backends") else None
        st.add_point(run_id, point, row.get("samples"))

    rows = _run_with_progress(Sweep(cfg, record), len(recipes) * len(cfg.S) * len(cfg.B), run_id, st)
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
    """At each (S, B): latency ×, memory × and throughput × of every recipe versus the baseline."""
    if not rows:
        return []
    base_name = _baseline(rows)
    ok = {(r["recipe"], r["S"], r["B"]): r for r in rows if r["status"] == "ok"}
    result = []
    for (name, S, B), r in ok.items():
        if name == base_name:
            continue
        base = ok.get((base_name, S, B))
        result.append({
            "S": S, "B": B, "recipe": name, "baseline": base_name,
            "latency_x": base["step_ms"] / r["step_ms"] if base else None,
            "memory_x": base["peak_bytes"] / r["peak_bytes"] if base else None,
            "throughput_x": r["tokens_per_s"] / base["tokens_per_s"] if base else None,
            "baseline_status": "ok" if base else next(
                (x["status"] for x in rows if (x["recipe"], x["S"], x["B"]) == (base_name, S, B)), "-"),
        })
    return sorted(result, key=lambda c: (c["B"], c["S"], c["recipe"]))


def _render(rows: list[dict], run_id: str, store_file: str) -> None:
    from rich.table import Table

    gk = sorted({(r["G"], r["K"], r["dtype"], r["device"]) for r in rows})
    t = Table(title=f"profile {run_id}: " + "; ".join(f"G {g}, K {k}, {d} on {dev}" for g, k, d, dev in gk))
    for col in ("recipe", "S", "B", "step ms", "p10–p90", "fold ms", "tok/s", "peak", "cache", "GB/s",
                "floor ms", "roofline"):
        t.add_column(col, justify="left" if col == "recipe" else "right")
    for r in rows:
        if r["status"] != "ok":
            t.add_row(r["recipe"], str(r["S"]), str(r["B"]), f"[red]{r['status']}", "", "", "", "",
                      fmt_bytes(r["cache_bytes"]), "", "", "")
            continue
        t.add_row(
            r["recipe"], str(r["S"]), str(r["B"]), f"{r['step_ms']:.3f}",
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
        for col in ("S", "B", "recipe", "latency ×", "memory ×", "throughput ×"):
            c.add_column(col, justify="left" if col == "recipe" else "right")
        for x in comp:
            cells = [f"{x[k]:.2f}×" if x[k] is not None else f"baseline {x['baseline_status']}"
                     for k in ("latency_x", "memory_x", "throughput_x")]
            c.add_row(str(x["S"]), str(x["B"]), x["recipe"], *cells)
        out.print(c)
    failed = [r for r in rows if r["status"] == "error"]
    for r in failed:
        err.print(f"[red]error[/] {r['recipe']} S={r['S']} B={r['B']}: {r['error']}")
    out.print(f"[dim]{len(rows)} points recorded in {store_file} (run {run_id}); "
              f"query them with: fsc query \"select * from profile where run_id = '{run_id}'\"[/]")


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
