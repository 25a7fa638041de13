"""Benchmarks behind docs/benchmarks.md (`make bench`): prints tables, records every figure in
the store (a run of kind 'bench', table bench_results) and ends with one JSON line.

    python -m tools.bench [--lengths 256,1024,4096] [--store DIR]
        [--skip SECTION,... | --only SECTION,...]

The sections (each its own figures, all by default):

- startup: `fsc --help` and `fsc --version` wall time (median of 7 subprocess runs);
- decode: cached versus --no-cache block diffusion of tiny_hybrid at each length (greedy);
- steps: step time against S for every tiny backbone (`fsc profile`, B 1, S 1k-64k,
  recorded in the same store);
- threads: a tiny forward pass with 1 and 2 torch threads, idle and on a busy machine;
- training: one optimizer step of every tiny recipe (frontier objective, passkey at 256 tokens,
  batch 8; AR at G = 1 beside it), median of 5 after 2 warm-up steps, the recipes in turn,
  and its ratio to tiny_attn's step and to its attention twin's (the same recipe with every
  layer attention) in the same run;
- results: `fsc plot KIND --run RUN` for the four profile figures and `fsc report RUN` (HTML)
  of the latest profile run in the store (the sweep of steps), wall time of the whole command,
  median of 3;
- scale: the default 24-point CPU sweep (`fsc profile`) in this process, with 2 local
  workers, on a 2-CPU local Ray cluster and through submitit's local executor: wall time of
  the command, the points' own time (the sum of their started..ended spans), the overhead
  per point, and each point's step time against the same point's in this process (min,
  median and max of the ratio: what sharing the cores does to a timing).

A `fsc` command a section runs that fails ends the tool with its last words on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tools.options import boundary, check_store, command, names, positives
from tools.timing import median_s

FSC = [sys.executable, "-m", "fsc"]
TINY = ["tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_gated_delta", "tiny_hybrid"]
STEP_S = [1024, 4096, 16384, 65536]
out = Console()


def _fsc(args: list[str]) -> str:
    """`fsc ARGS` in a new process, one torch thread (whatever FSC_THREADS the caller set: the
    figures are of fsc's default); its stdout. A failure ends the tool with the command and the
    last of its stderr, in one line."""
    env = {**os.environ, "FSC_THREADS": "1"}
    res = subprocess.run([*FSC, *args], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        said = " ".join(res.stderr.split())[-400:]
        raise SystemExit(f"fsc {' '.join(args)} failed (exit {res.returncode}): {said}")
    return res.stdout


def startup(record) -> None:
    for args in (["--help"], ["--version"]):
        ms = median_s(lambda a=args: _fsc(a), 7) * 1e3
        record(f"startup.fsc {' '.join(args)}", ms, "ms", {"runs": 7})
        out.print(f"fsc {' '.join(args)}: median {ms:.0f} ms over 7 runs")


def decode(record, lengths: list[int]) -> None:
    t = Table(title="tiny_hybrid block diffusion (G 4, K 4, greedy): cached vs --no-cache")
    for col in ("tokens", "cached tok/s", "no-cache tok/s", "speed-up", "same tokens"):
        t.add_column(col, justify="right")
    for n in lengths:
        res = {}
        for cached in (True, False):
            args = ["decode", "tiny_hybrid", "--prompt", "The", "--length", str(n),
                    "--device", "cpu", "--json"]
            doc = json.loads(_fsc(args + ([] if cached else ["--no-cache"])))
            res[cached] = doc
            record("decode.tokens_per_s", doc["stats"]["tokens_per_s"], "tok/s",
                   {"recipe": "tiny_hybrid", "length": n, "cached": cached,
                    "forward_passes": doc["stats"]["forward_passes"]})
        speedup = res[True]["stats"]["tokens_per_s"] / res[False]["stats"]["tokens_per_s"]
        same = res[True]["token_ids"] == res[False]["token_ids"]
        record("decode.cache_speedup", speedup, "x", {"recipe": "tiny_hybrid", "length": n})
        t.add_row(str(n), f"{res[True]['stats']['tokens_per_s']:.1f}",
                  f"{res[False]['stats']['tokens_per_s']:.1f}", f"{speedup:.1f}×", str(same))
        out.print(f"decode {n} tokens: {speedup:.1f}× faster with the cache")
    out.print(t)


def steps(record, store: Path) -> None:
    # on the CPU wherever it runs: a GPU would time other kernels (and `auto` picks it)
    args = ["profile", *[a for r in TINY for a in ("-r", r)], "--S", ",".join(map(str, STEP_S)),
            "--B", "1", "--device", "cpu", "--store", str(store), "--json"]
    doc = json.loads(_fsc(args))
    by = {(p["recipe"], p["S"]): p for p in doc["points"] if p["status"] == "ok"}
    t = Table(title=f"step ms against S (B 1, CPU, torch reference), profile run {doc['run_id']}")
    t.add_column("recipe")
    for S in STEP_S:
        t.add_column(f"S={S}", justify="right")
    t.add_column(f"step({STEP_S[-1]}) / step({STEP_S[0]})", justify="right")
    for r in TINY:
        row = [by.get((r, S)) for S in STEP_S]
        ratio = row[-1]["step_ms"] / row[0]["step_ms"] if row[0] and row[-1] else float("nan")
        record("steps.growth", ratio, "x", {"recipe": r, "S_from": STEP_S[0], "S_to": STEP_S[-1],
                                          "profile_run": doc["run_id"]})
        t.add_row(r, *(f"{p['step_ms']:.2f}" if p else "-" for p in row), f"{ratio:.2f}×")
    out.print(t)


def threads(record) -> None:
    """A tiny_hybrid forward (68 tokens) with 1 and 2 torch threads, idle and beside two
    busy processes (what a shared 2-core machine looks like): why FSC_THREADS defaults to 1."""
    import torch

    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    model = build_model(load_recipe("tiny_hybrid")).eval()
    tokens = torch.randint(0, 256, (1, 68), generator=torch.Generator().manual_seed(0))

    def median_ms(n: int) -> float:
        torch.set_num_threads(n)
        with torch.no_grad():
            return median_s(lambda: model.forward_blockwise(tokens), 12, warmup=3) * 1e3

    t = Table(title="tiny_hybrid forward_blockwise, 68 tokens (median ms)")
    for col in ("torch threads", "idle", "2 busy processes"):
        t.add_column(col, justify="right")
    results = {n: [median_ms(n)] for n in (1, 2)}
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.5)
        for n in (1, 2):
            results[n].append(median_ms(n))
    finally:
        for p in busy:
            p.kill()
            p.wait()
    for n, (idle, loaded) in results.items():
        record("threads.forward_ms", idle, "ms", {"threads": n, "busy_processes": 0})
        record("threads.forward_ms", loaded, "ms", {"threads": n, "busy_processes": 2})
        t.add_row(str(n), f"{idle:.1f}", f"{loaded:.1f}")
    out.print(t)


def attention_twin(recipe):
    """`recipe` with every layer attention (its own attention section, else tiny_attn's) and
    everything else kept: the layers, the width, the MLP or MoE. A recipe's step against its
    twin's is the cost of its mixers alone; against tiny_attn's it is also the cost of its shape
    (tiny_hybrid has four layers and a top-2 MoE where tiny_attn has two and an MLP)."""
    from fsc.recipe import load_recipe, parse_recipe

    data = recipe.model_dump(mode="json", exclude_none=True)
    if set(recipe.layer_plan) == {"attention"}:
        return recipe
    attention = data.get("attention") or load_recipe("tiny_attn").model_dump(mode="json")["attention"]
    kinds = set(recipe.layer_plan)
    data = {k: v for k, v in data.items() if k not in kinds}
    return parse_recipe({**data, "name": f"{recipe.name}_attention_twin",
                         "layers": {"default": "attention"}, "attention": attention})


def training(record) -> None:
    """One optimizer step per tiny recipe and objective, its ratio to tiny_attn's and to its
    attention twin's (`attention_twin`). Every model takes its steps in turn (round robin, after
    2 warm-up steps each), so that a machine whose load changes during the run slows them alike
    and the ratios hold."""
    import shutil
    import tempfile

    import torch

    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe
    from fsc.tokenizer import ByteTokenizer
    from fsc.train.loop import TrainConfig, Trainer

    torch.set_num_threads(1)
    t = Table(title="one training step: passkey, 256 tokens, batch 8, fp32, 1 thread (median ms)")
    for col in ("recipe", "frontier ms", "frontier tok/s", "vs attn", "vs twin", "ar ms",
                "ar tok/s", "vs attn", "vs twin"):
        t.add_column(col, justify="right")
    tmp = Path(tempfile.mkdtemp())
    cells: dict[str, list[str]] = {name: [] for name in TINY}
    recipes = {name: load_recipe(name) for name in TINY}

    def shape(r):  # a recipe but its name
        return json.dumps({**r.model_dump(mode="json"), "name": None}, sort_keys=True)

    models, twin_of = dict(recipes), {}
    for name, r in recipes.items():  # a twin timed once, and not at all where it is tiny_attn
        twin = attention_twin(r)
        twin_of[name] = next((k for k, m in models.items() if shape(m) == shape(twin)),
                             f"{name}/twin")
        models.setdefault(twin_of[name], twin)
    try:
        for objective in ("frontier", "ar"):
            trainers = {}
            for key, recipe in models.items():
                if objective == "ar":
                    recipe = recipe.model_copy(update={"block_size": 1})
                model = build_model(recipe, dtype=torch.float32)
                cfg = TrainConfig(source=recipe.name, data="passkey", seq_len=256, steps=10,
                                  out=str(tmp / key.replace("/", "-")), batch=8, objective=objective)
                trainers[key] = Trainer(cfg, recipe, model, ByteTokenizer())
            times: dict[str, list[float]] = {key: [] for key in trainers}
            for i in range(7):
                for key, trainer in trainers.items():
                    t0 = time.perf_counter()
                    trainer.train_step()
                    if i >= 2:
                        times[key].append(time.perf_counter() - t0)
            ms = {key: sorted(v)[len(v) // 2] * 1e3 for key, v in times.items()}
            for name in TINY:
                ratio = ms[name] / ms["tiny_attn"]
                twin = ms[twin_of[name]]
                params = {"recipe": name, "objective": objective, "seq_len": 256, "batch": 8}
                record("train.step_ms", ms[name], "ms", params)
                record("train.tokens_per_s", 8 * 256 / ms[name] * 1e3, "tok/s", params)
                record("train.step_vs_attn", ratio, "x", params)
                record("train.twin_step_ms", twin, "ms", params)
                record("train.step_vs_twin", ms[name] / twin, "x", params)
                cells[name] += [f"{ms[name]:.0f}", f"{8 * 256 / ms[name] * 1e3:.0f}", f"{ratio:.2f}×",
                                f"{ms[name] / twin:.2f}×"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name in TINY:
        t.add_row(name, *cells[name])
    Console(width=140).print(t)


def results(record, store: Path) -> None:
    import tempfile

    from fsc.errors import UsageError
    from fsc.results import select
    from fsc.store import Store

    try:
        (run_id,) = select.pick_runs(Store(store), select.PROFILE, [])
    except UsageError as e:
        out.print(f"results: skipped ({e})")
        return
    points = len(select.rows(Store(store), select.PROFILE, [run_id]))
    t = Table(title=f"reading results back: {points} points of run {run_id} (median of 3, s)")
    for col in ("command", "wall s", "output bytes"):
        t.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        # the run the table names, not whatever else the store's defaults would add (the
        # report's: the latest training and evaluation runs too)
        jobs = [(f"plot {k}", ["plot", k, "--run", run_id, "--force", "--out", f"{tmp}/{k}.png"],
                 f"{tmp}/{k}.png") for k in ("latency", "memory", "throughput", "roofline")]
        jobs.append(("report", ["report", run_id, "--force", "--out", f"{tmp}/report.html"],
                     f"{tmp}/report.html"))
        for name, args, made in jobs:
            seconds = median_s(lambda args=args: _fsc([*args, "--store", str(store)]), 3)
            size = Path(made).stat().st_size
            params = {"command": f"fsc {name}", "points": points}
            record("results.wall_s", seconds, "s", params)
            record("results.output_bytes", size, "bytes", params)
            t.add_row(f"fsc {name}", f"{seconds:.2f}", f"{size:,}")
    out.print(t)


SCALE = {"in process": [], "2 local workers": ["--workers", "2"],
         "Ray, 2-CPU local cluster": ["--executor", "ray", "--address", "local"],
         "submitit, local executor": ["--executor", "slurm"]}


def scale(record) -> None:
    import tempfile

    from fsc.store import Store

    t = Table(title="the default CPU sweep (24 points) by executor")
    for col in ("executor", "wall s", "points' own s", "speed-up", "overhead / point s",
                "step ms / in process's"):
        t.add_column(col, justify="right")
    base = None
    alone: dict = {}  # (recipe, S, B) -> step ms measured in the fsc process
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, args) in enumerate(SCALE.items()):
            store = Path(tmp) / f"s{i}"
            t0 = time.perf_counter()
            # the CPU's default sweep wherever it runs (`auto` would pick a GPU's 3B trio)
            _fsc(["profile", "--device", "cpu", "--store", str(store), *args, "--json"])
            wall = time.perf_counter() - t0
            _, rows = Store(store).query(
                "SELECT count(*), sum(epoch(ended_at) - epoch(started_at)) FROM profile_points")
            n, busy = rows[0]
            _, steps = Store(store).query("SELECT recipe, S, B, step_ms FROM profile_points "
                                          "WHERE status = 'ok'")
            if not args:  # the first, in the fsc process: what the others are held to
                alone = {tuple(r[:3]): r[3] for r in steps}
            ratios = sorted(r[3] / alone[tuple(r[:3])] for r in steps if tuple(r[:3]) in alone)
            lanes = 1 if not args else 2
            overhead = (wall - busy / lanes) / n
            base = base or wall
            params = {"executor": name, "points": n}
            record("scale.wall_s", wall, "s", params)
            record("scale.points_s", busy, "s", params)
            record("scale.overhead_per_point_s", overhead, "s", params)
            spread = "–"
            if args and ratios:  # how much sharing the cores inflates each point's timing
                for stat, v in (("min", ratios[0]), ("median", ratios[len(ratios) // 2]),
                                ("max", ratios[-1])):
                    record(f"scale.step_ratio_{stat}", v, "x", params)
                spread = (f"{ratios[0]:.2f}–{ratios[-1]:.2f}× "
                          f"(median {ratios[len(ratios) // 2]:.2f}×)")
            t.add_row(name, f"{wall:.1f}", f"{busy:.1f}", f"{base / wall:.2f}×", f"{overhead:.2f}",
                      spread)
    out.print(t)


SECTIONS = ("startup", "decode", "steps", "threads", "training", "results", "scale")


def options(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tools.bench",
                                 description=" ".join(__doc__.split("\n\n")[0].split()))
    ap.add_argument("--lengths", type=positives, default=[256, 1024, 4096],
                    help="decode: generated tokens, comma-separated (default 256,1024,4096)")
    ap.add_argument("--store", type=Path, default=None,
                    help="the store the run and the steps sweep are recorded in (default: "
                    "FSC_STORE, else ./store)")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--skip", type=names(SECTIONS), default=[],
                       help=f"comma list of sections not to run: {', '.join(SECTIONS)}")
    which.add_argument("--only", type=names(SECTIONS), default=None,
                       help="comma list of the sections to run, the others skipped")
    a = ap.parse_args(argv)
    a.sections = [s for s in SECTIONS if (s in a.only if a.only is not None else s not in a.skip)]
    return a


def main(argv: list[str] | None = None) -> None:
    a = options(argv)
    from fsc.provenance import environment

    st = check_store(a.store)
    figures = []
    with st.run("bench", command("bench", argv),
                vars(a) | {"store": str(st.dir)}, environment=environment("cpu")) as run:

        def record(name, value, unit, params):
            run.add_bench(name, value, unit, params)
            figures.append({"name": name, "value": value, "unit": unit, **params})

        sections = {"startup": lambda: startup(record), "decode": lambda: decode(record, a.lengths),
                    "steps": lambda: steps(record, st.dir), "threads": lambda: threads(record),
                    "training": lambda: training(record),
                    "results": lambda: results(record, st.dir), "scale": lambda: scale(record)}
        for name in a.sections:
            sections[name]()
    print(json.dumps({"run_id": run.run_id, "figures": figures}))


if __name__ == "__main__":
    boundary(main, "python -m tools.bench")
