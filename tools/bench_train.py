"""The training step as `fsc train` takes it, against attention's (docs/benchmarks.md §8).

    python -m tools.bench_train [--recipes tiny_attn,tiny_gla,...] [--rounds 4] [--steps 60,10]

Each recipe is trained by `fsc train RECIPE --data passkey --seq-len 256 --batch 8` (the default
objective: frontier, as G > 1) for the long and the short number of steps; a step's time is the
difference of the two runs' wall times over the difference of their steps, so that start-up,
the first steps' warm-up and the save at the end cancel. Each recipe is timed beside its
references, tiny_attn and its attention twin (`tools.bench.attention_twin`, written to a recipe
file and trained the same way): their long runs in turn, then their short runs, so that a
machine whose load drifts slows the runs a ratio compares alike; the recipes follow one
another, and the whole goes round `--rounds` times. Each ratio is given per round and as the
median and range over the rounds, of wall time (what the issue measured) and of the process's
CPU time (user + system, which another process's load on a shared machine barely moves). One
torch thread (FSC_THREADS=1). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from tools.bench import TINY, attention_twin
from tools.options import Refused, boundary, count, positive

FSC = [sys.executable, "-m", "fsc"]


def train_s(recipe: str, steps: int, tmp: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `fsc train` run of `steps` steps (its own store and
    directory)."""
    run = tmp / f"run-{time.monotonic_ns()}"
    cmd = [*FSC, "train", recipe, "--data", "passkey", "--seq-len", "256", "--batch", "8",
           "--train-steps", str(steps), "--out", str(run / "out"), "--store", str(run / "store"),
           "--save-minutes", "0"]
    env = dict(os.environ, FSC_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        said = " ".join(res.stderr.split())[-400:]
        raise SystemExit(f"fsc train {recipe} failed (exit {res.returncode}): {said}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def twins(names: list[str], tmp: Path) -> dict[str, str]:
    """Each recipe's attention twin as something `fsc train` takes: tiny_attn where the twin is
    tiny_attn's shape, else a recipe file written under `tmp`."""
    from fsc.recipe import load_recipe

    attn = load_recipe("tiny_attn").model_dump(mode="json", exclude_none=True)
    out = {}
    for name in names:
        twin = attention_twin(load_recipe(name)).model_dump(mode="json", exclude_none=True)
        if {**twin, "name": None} == {**attn, "name": None}:
            out[name] = "tiny_attn"
        else:
            path = tmp / f"{twin['name']}.yaml"
            twin.pop("recipe_hash", None)
            path.write_text(yaml.safe_dump(twin, sort_keys=False))
            out[name] = str(path)
    return out


def ratios(ms: list[float], ref: list[float]) -> dict:
    """Per-round ratios of ms to ref, their median and range."""
    r = [a / b for a, b in zip(ms, ref)]
    return {"median": statistics.median(r), "range": [min(r), max(r)], "rounds": r}


def steps_pair(text: str) -> tuple[int, int]:
    """argparse type of --steps: 'LONG,SHORT', whole numbers, LONG > SHORT (a step is their
    runs' difference over LONG - SHORT)."""
    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not LONG,SHORT")
    long, short = (count(p) for p in parts)
    if long <= short:
        raise argparse.ArgumentTypeError(f"the long run's {long} steps are not more than the "
                                         f"short run's {short}")
    return long, short


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.bench_train", description=__doc__.split("\n")[0])
    ap.add_argument("--recipes", default=",".join(TINY[1:]),
                    help="comma-separated, timed beside tiny_attn and their twins (default: "
                    "every tiny recipe but tiny_attn)")
    ap.add_argument("--rounds", type=positive, default=4,
                    help="the recipes timed by turns this many times (default 4)")
    ap.add_argument("--steps", type=steps_pair, default=(60, 10),
                    help="the long and the short run's steps, LONG,SHORT with LONG > SHORT "
                    "(default 60,10)")
    args = ap.parse_args(argv)
    long, short = args.steps
    names = [n.strip() for n in args.recipes.split(",") if n.strip()]
    if not names:
        raise Refused("--recipes: name at least one recipe")
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise Refused(f"--recipes: {', '.join(twice)} given twice")
    clocks = ("wall", "cpu")
    # step_ms[clock][recipe][ref]: the recipe's and its references' steps, one per round
    step_ms: dict = {c: {n: {} for n in names} for c in clocks}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        twin = twins(names, tmp)
        for i in range(args.rounds):
            for name in names:
                group = list(dict.fromkeys(["tiny_attn", name, twin[name]]))
                runs = {r: train_s(r, long, tmp) for r in group}
                for r in group:
                    t_short = train_s(r, short, tmp)
                    for j, c in enumerate(clocks):
                        step = (runs[r][j] - t_short[j]) / (long - short) * 1e3
                        step_ms[c][name].setdefault(r, []).append(step)
                wall = step_ms["wall"][name]
                print(f"round {i + 1} {name}: " + ", ".join(f"{Path(r).stem} {wall[r][-1]:.0f} ms"
                                                           for r in group), flush=True)
    results = {}
    for name in names:
        results[name] = {}
        for c in clocks:
            s = step_ms[c][name]
            results[name][c] = {"step_ms": statistics.median(s[name]),
                                "attn_ms": statistics.median(s["tiny_attn"]),
                                "vs_attn": ratios(s[name], s["tiny_attn"]),
                                "vs_twin": ratios(s[name], s[twin[name]])}
            r = results[name][c]
            va, vt = r["vs_attn"], r["vs_twin"]
            print(f"{name:18s} {c:4s} {r['step_ms']:5.0f} ms (attn {r['attn_ms']:3.0f})  "
                  f"vs attn {va['median']:.2f} ({va['range'][0]:.2f}–{va['range'][1]:.2f})  "
                  f"vs twin {vt['median']:.2f} ({vt['range'][0]:.2f}–{vt['range'][1]:.2f})")
    print(json.dumps({"rounds": args.rounds, "steps": [long, short], "load": os.getloadavg(),
                      "results": results}))


if __name__ == "__main__":
    boundary(main, "python -m tools.bench_train")
