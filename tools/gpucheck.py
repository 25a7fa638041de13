"""GPU check of the Triton kernels: accuracy, speed against the torch path and the HBM floor.

    python -m tools.gpucheck             # on one GPU (make gpu-check); under 8 minutes on an H200
    python -m tools.gpucheck --dry-run   # tiny shapes on the CPU under the Triton interpreter

For every kernel at the 3B shapes (hard-coded below: this runs on the GPU image, which lacks
pydantic and duckdb, so no recipe is loaded) and B in {1, 8} — block attention also at S in
{4096, 65536, 262144} — it measures the bf16 kernel's error against the fp32 reference on the
same inputs, its median time (`triton.testing.do_bench`) against the pure-torch reference (and
`scaled_dot_product_attention` for attention), and the bytes the op must move: achieved GB/s and
the fraction of the device's HBM bandwidth. A point that does not fit in memory, or fails, is a
row with its status and the check goes on. Then each kernel under other launch choices (the
`Tuning` of its module: tiles, warps, and for attention pipeline depth and split rule; block
attention at S in {65536, 262144}, the state kernels' steps at B = 1 and 8), reporting the defaults
against the fastest. Then, if `fsc.profile` is importable, a short
`fsc profile` sweep. One table is printed; everything goes to $OUT/gpucheck.json (or
./gpucheck.json).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback

from fsc.kernels import op_folders
from fsc.kernels.points import SHAPES_DRY, Point, attention_points, state_points

from fsc.costmodel.devices import device_spec
from fsc.errors import is_out_of_memory
from tools.timing import median_s

POINTS = {"S": (4096, 65536, 262144), "B": (1, 8)}
POINTS_DRY = {"S": (0, 40), "B": (1, 2)}
BUDGET_S = 6.5 * 60  # the whole check, profile included; `make gpu-check` then runs tests/gpu
PROFILE_ARGS = ["--recipe", "attn_3b", "--recipe", "mamba_3b", "--recipe", "hybrid_3b",
                "--S", "262144", "--B", "1,8"]


def shapes_3b() -> dict:
    """The kernels' shapes in the paper's 3B backbones, read from recipes/attn_3b.yaml and
    mamba_3b.yaml through the mixer registry (d_model 2560: 20 heads × 128; Mamba d_inner 5120
    = 80 heads × 64, N 128, conv width 4; G 32). Linear, GLA and Gated DeltaNet use the
    attention heads."""
    from fsc.mixers import attention, mamba
    from fsc.recipe import load_recipe

    a, m = load_recipe("attn_3b"), load_recipe("mamba_3b")
    heads, kv_heads, head_dim = attention.dims(a.attention, a.d_model)
    md = mamba.dims(m.mamba, m.d_model)
    return {"G": a.block_size, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
            "m_heads": md.n_heads, "m_head_dim": md.head_dim, "d_state": md.d_state,
            "d_conv": md.d_conv, "conv_dim": md.conv_dim}


# -- measuring -------------------------------------------------------------------------------
def bench_us(fn, device, rep_ms: int = 100) -> float:
    """Median time of `fn` in µs: do_bench on a GPU (it flushes L2), a wall clock on the CPU."""
    if device.type == "cuda":
        from triton.testing import do_bench

        return do_bench(fn, warmup=rep_ms // 4, rep=rep_ms, return_mode="median") * 1e3
    return median_s(fn, 3) * 1e6


def hbm_bandwidth(name: str) -> float | None:
    """The device's HBM bandwidth in bytes/s from the cost model's device table, if listed."""
    spec = device_spec(name)
    return spec.bandwidth_bytes_per_s if spec is not None else None



def copy_bandwidth(device, nbytes: int = 2 << 30) -> float | None:
    """Bytes a second a device-to-device copy of `nbytes` moves (read plus written): the
    bandwidth a kernel can practically reach, beside the nominal figure."""
    if device.type != "cuda":
        return None
    import torch

    try:
        src = torch.empty(nbytes, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        return 2 * nbytes / (bench_us(lambda: dst.copy_(src), device) * 1e-6)
    except Exception:  # noqa: BLE001 - a reference figure; the check goes on without it
        return None
    finally:
        _free(device)


def measure(point: Point, device, bandwidth: float | None) -> dict:
    row = {"op": point.op, "mode": point.mode, "B": point.B, "S": point.S, "bytes": point.bytes,
           "status": "ok"}
    try:
        if point.accuracy is not None:
            row.update(point.accuracy())
        row["triton_us"] = bench_us(point.triton, device)
    except Exception as e:  # noqa: BLE001 - a kernel that fails to compile is a row, not the end
        row["status"] = "oom" if is_out_of_memory(e) else f"error: {type(e).__name__}: {e}"[:300]
        row["traceback"] = traceback.format_exc(limit=6)
        return row
    for key, fn in (("torch_us", point.torch), ("sdpa_us", point.sdpa)):
        if fn is None:
            continue
        try:
            row[key] = bench_us(fn, device)
        except Exception as e:  # noqa: BLE001 - the comparison may not fit; the kernel did
            row[key] = None
            row[key.replace("_us", "_status")] = "oom" if is_out_of_memory(e) else repr(e)[:200]
        _free(device)
    seconds = row["triton_us"] * 1e-6
    row["gb_per_s"] = point.bytes / seconds / 1e9
    if bandwidth:
        row["floor_us"] = point.bytes / bandwidth * 1e6
        row["frac_hbm"] = point.bytes / seconds / bandwidth
    if row.get("torch_us"):
        row["speedup_vs_torch"] = row["torch_us"] / row["triton_us"]
    return row


def _free(device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        import torch

        torch.cuda.empty_cache()


def _fits(nbytes: int, device) -> bool:
    if device.type != "cuda":
        return True
    import torch

    free, _ = torch.cuda.mem_get_info(device)
    return nbytes < 0.9 * free


def run_points(device, dtype, shapes, points, bandwidth, deadline, log) -> list[dict]:
    import torch

    gen = torch.Generator(device=device).manual_seed(0)
    rows = []
    plan = [("state", B, None) for B in points["B"]]
    plan += [("attention", B, S) for B in points["B"] for S in points["S"]]
    for kind, B, S in plan:
        if time.monotonic() > deadline:
            rows.append({"op": kind, "B": B, "S": S, "status": "skipped: time budget spent"})
            continue
        if kind == "attention":
            e = torch.empty((), dtype=dtype).element_size()
            kv = 4 * B * (S + shapes["G"]) * shapes["kv_heads"] * shapes["head_dim"] * e
            if not _fits(kv, device):  # the cache plus the concatenated copy SDPA reads
                rows.append({"op": "block_attention", "mode": "step", "B": B, "S": S,
                             "status": "oom", "bytes": kv // 2})
                continue
        try:
            made = (attention_points(B, S, shapes, dtype, device, gen) if kind == "attention"
                    else state_points(B, shapes, dtype, device, gen))
        except Exception as e:  # noqa: BLE001
            rows.append({"op": kind, "B": B, "S": S,
                         "status": "oom" if is_out_of_memory(e) else f"error: {e!r}"[:300]})
            _free(device)
            continue
        for p in made:
            row = measure(p, device, bandwidth)
            log(f"{row['op']:<18} {row['mode']:<4} B={B} S={S}: {row['status']}"
                + (f", {row['triton_us']:.1f} µs" if "triton_us" in row else ""))
            rows.append(row)
        del made
        _free(device)
    return rows


# -- tuning the launch choices ------------------------------------------------------------
TUNE_ATTENTION = ((1, 65536), (1, 262144), (8, 65536), (8, 262144))  # (B, S)
TUNE_ATTENTION_DRY = ((1, 40), (2, 40))
TUNE_STATE_B = (1, 8)
TUNE_BUDGET_S = 120
FOLDERS = op_folders()  # op -> its kernel folder, the kernel's name in $FSC_KERNEL_TUNING


def tune_trials(op: str, dry_run: bool) -> list[dict]:
    """Launch choices to try for `op`: changes to the `Tuning` fields of its kernel module (its
    `TRIALS`), the defaults ({}) first."""
    grid = importlib.import_module(f"fsc.kernels.{FOLDERS[op]}.triton").TRIALS
    if dry_run:  # the defaults, the first alternative and the last, at tiny shapes
        return [{}, *grid[:1], *grid[-1:]]
    return [{}, *grid]


def run_tuning(device, dtype, shapes, bandwidth, deadline, dry_run: bool, log) -> list[dict]:
    """Time each kernel under each of its `tune_trials`: block attention at long S, the state
    kernels' steps at B = 1 and 8. One row per op and shape, with the default and the fastest
    choice and every trial kept."""
    import torch
    from fsc.kernels import _common

    gen = torch.Generator(device=device).manual_seed(1)
    attention, state_b = (TUNE_ATTENTION_DRY, (2,)) if dry_run else (TUNE_ATTENTION, TUNE_STATE_B)
    targets = [(lambda B=B, S=S: attention_points(B, S, shapes, dtype, device, gen), B, S)
               for B, S in attention]
    targets += [(lambda B=B: state_points(B, shapes, dtype, device, gen), B, None)
                for B in state_b]
    rows = []
    for build, B, S in targets:
        if time.monotonic() > deadline:
            rows.append({"B": B, "S": S, "status": "skipped: time budget spent"})
            continue
        try:
            points = [p for p in build() if p.mode == "step"]
        except Exception as e:  # noqa: BLE001 - a shape that does not fit is a row
            rows.append({"B": B, "S": S, "status": "oom" if is_out_of_memory(e) else repr(e)[:300]})
            _free(device)
            continue
        for point in points:
            module = importlib.import_module(f"fsc.kernels.{FOLDERS[point.op]}.triton")
            trials = []
            for change in tune_trials(point.op, dry_run):
                if time.monotonic() > deadline:
                    break
                trial = {"change": change}
                try:
                    with _common.tuned(module, **change):
                        trial["us"] = bench_us(point.triton, device, rep_ms=50)
                except Exception as e:  # noqa: BLE001 - a choice that does not compile is a trial
                    trial["error"] = f"{type(e).__name__}: {e}"[:200]
                trials.append(trial)
            rows.append(_tuning_row(point, trials, bandwidth))
            row = rows[-1]
            log(f"tuning {row['op']} B={B} S={S}: {row['status']}"
                + (f", default {row['default_us']:.1f} µs, best {row['best_us']:.1f} µs "
                   f"{row['best']}" if row["status"] == "ok" else ""))
        del points
        _free(device)
    return rows


def _tuning_row(point: Point, trials: list[dict], bandwidth: float | None) -> dict:
    timed = [t for t in trials if "us" in t]
    row = {"op": point.op, "mode": point.mode, "B": point.B, "S": point.S, "bytes": point.bytes,
           "trials": trials, "status": ("skipped: time budget spent" if not trials
                                        else "ok" if "us" in trials[0] else "error")}
    if row["status"] == "ok":
        best = min(timed, key=lambda t: t["us"])
        row.update(default_us=trials[0]["us"], best_us=best["us"], best=best["change"],
                   gain=trials[0]["us"] / best["us"],
                   best_env=",".join(f"{FOLDERS[point.op]}.{k}={'none' if v is None else v}"
                                     for k, v in best["change"].items()))
        if bandwidth:
            row["default_frac_hbm"] = point.bytes / (trials[0]["us"] * 1e-6) / bandwidth
            row["best_frac_hbm"] = point.bytes / (best["us"] * 1e-6) / bandwidth
    return row


TUNE_COLUMNS = [("op", "op", "{}"), ("B", "B", "{}"), ("S", "S", "{}"), ("default_us", "default µs", "{:.1f}"),
                ("default_frac_hbm", "of HBM", "{:.0%}"), ("best_us", "best µs", "{:.1f}"),
                ("best_frac_hbm", "of HBM", "{:.0%}"), ("gain", "gain", "{:.2f}×"),
                ("best", "best choice", "{}"), ("status", "status", "{}")]


# -- the profile sweep -----------------------------------------------------------------------
def run_profile(deadline, dry_run: bool) -> dict:
    """`fsc profile` over the 3B recipes at 256k, when its dependencies (pydantic, duckdb: carried
    as wheels by `make gpu-wheels`) import."""
    if dry_run:
        return {"status": "skipped: dry run"}
    try:
        importlib.import_module("fsc.profile")
        importlib.import_module("fsc.store")
    except ImportError as e:
        return {"status": f"unavailable: {e!r} (run `make gpu-wheels` first)"[:300]}
    remaining = deadline - time.monotonic()
    if remaining < 30:
        return {"status": "skipped: time budget spent"}
    with tempfile.TemporaryDirectory() as store:
        cmd = [sys.executable, "-m", "fsc", "profile", *PROFILE_ARGS, "--store", store, "--json"]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=remaining, check=False)
        except subprocess.TimeoutExpired:
            return {"status": f"timeout after {remaining:.0f} s", "cmd": cmd}
    out = {"status": "ok" if res.returncode == 0 else f"exit {res.returncode}", "cmd": cmd,
           "stderr_tail": res.stderr[-2000:]}
    try:
        out["result"] = json.loads(res.stdout)
    except ValueError:
        out["stdout_tail"] = res.stdout[-2000:]
    return out


# -- output ----------------------------------------------------------------------------------
COLUMNS = [("op", "op", "{}"), ("mode", "mode", "{}"), ("B", "B", "{}"), ("S", "S", "{}"),
           ("rel_err", "err", "{:.1e}"), ("state_rel_err", "state err", "{:.1e}"),
           ("triton_us", "triton µs", "{:.1f}"), ("torch_us", "torch µs", "{:.1f}"),
           ("sdpa_us", "sdpa µs", "{:.1f}"), ("floor_us", "floor µs", "{:.1f}"),
           ("gb_per_s", "GB/s", "{:.0f}"), ("frac_hbm", "of HBM", "{:.0%}"),
           ("speedup_vs_torch", "× torch", "{:.1f}"), ("status", "status", "{}")]


def _cell(row, key, fmt) -> str:
    v = row.get(key)
    if key == "op":
        v = FOLDERS.get(v, v)
    if isinstance(v, dict):  # a tuning change
        v = ", ".join(f"{k} {x}" for k, x in v.items()) or "the default"
    return "-" if v is None else fmt.format(v)


def print_table(rows, title, columns=COLUMNS) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        print(" | ".join(h for _, h, _ in columns))
        for r in rows:
            print(" | ".join(_cell(r, k, f) for k, _, f in columns))
        return
    table = Table(title=title)
    for _, head, _ in columns:
        left = head in ("op", "mode", "status", "best choice")
        table.add_column(head, justify="left" if left else "right")
    for r in rows:
        table.add_row(*(_cell(r, k, f) for k, _, f in columns))
    Console(width=max(150, Console().width)).print(table)


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x


def write_json(result: dict) -> str:
    """$OUT/gpucheck.json (or ./gpucheck.json), rewritten as each phase ends so that a check
    stopped from outside still leaves what it measured."""
    path = os.path.join(os.environ.get("OUT") or os.getcwd(), "gpucheck.json")
    with open(path, "w") as f:
        json.dump(_json_safe(result), f, indent=1, default=str)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gpucheck", description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="tiny shapes on the CPU under the Triton interpreter")
    parser.add_argument("--budget", type=float, default=BUDGET_S, metavar="SECONDS",
                        help=f"the whole check's time (default {BUDGET_S:.0f}): about 45 %% for "
                             "the points, 25 %% for tuning, the rest for the profile sweep")
    args = parser.parse_args(argv)
    if args.budget < 60:
        parser.error("--budget must be at least 60 seconds")
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    start = time.monotonic()
    deadline = start + args.budget

    import torch
    import triton
    from fsc.kernels import TUNING_ENV

    def log(msg):
        print(f"[{time.monotonic() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    if args.dry_run:
        device, shapes, points = torch.device("cpu"), SHAPES_DRY, POINTS_DRY
    elif torch.cuda.is_available():
        device, shapes, points = torch.device("cuda"), shapes_3b(), POINTS
    else:
        print("no CUDA device: run with --dry-run for the CPU interpreter check", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (interpreter)"
    bandwidth = hbm_bandwidth(name)
    log(f"{name}; torch {torch.__version__}, triton {triton.__version__}")
    copy = copy_bandwidth(device)
    if copy:
        log(f"device-to-device copy: {copy / 1e12:.2f} TB/s (read + written)")

    def head() -> dict:
        return {"device": name, "hbm_bytes_per_s": bandwidth, "copy_bytes_per_s": copy,
                "kernel_tuning": os.environ.get(TUNING_ENV) or None, "torch": torch.__version__,
                "triton": triton.__version__, "cuda": torch.version.cuda,
                "dry_run": args.dry_run, "shapes": shapes, "dtype": "bf16",
                "seconds": time.monotonic() - start}

    with torch.no_grad():
        # the budget: the points first, then at most TUNE_BUDGET_S of tuning, then the profile
        rows = run_points(device, torch.bfloat16, shapes, points, bandwidth,
                          start + 0.45 * args.budget, log)
        write_json({**head(), "rows": rows, "partial": True})
        log("tuning the launch choices")
        tuning = run_tuning(device, torch.bfloat16, shapes, bandwidth,
                            min(time.monotonic() + TUNE_BUDGET_S, start + 0.7 * args.budget),
                            args.dry_run, log)
        write_json({**head(), "rows": rows, "tuning": tuning, "partial": True})
    log("profile sweep")
    profile = run_profile(deadline, args.dry_run)
    result = {**head(), "rows": rows, "tuning": tuning, "profile": profile}
    title = f"fsc gpucheck — {name}"
    if bandwidth:
        title += f", HBM {bandwidth / 1e12:.2f} TB/s"
    if copy:
        title += f" (a device copy reaches {copy / 1e12:.2f} TB/s)"
    print_table(rows, title)
    print_table(tuning, "launch choices: the defaults against the fastest tried", TUNE_COLUMNS)
    better = [r for r in tuning if r.get("gain", 1) >= 1.05 and r.get("best_env")]
    if better:
        print(f"to launch with a faster choice, set {TUNING_ENV} (comma-separated) to:")
        for r in better:
            print(f"  {r['best_env']}    # {FOLDERS.get(r['op'], r['op'])} B={r['B']} "
                  f"S={r['S']}: {r['gain']:.2f}×")
    print(f"profile: {profile['status']}")
    log(f"wrote {write_json(result)}")
    failed = [r for r in rows if r["status"].startswith("error")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
