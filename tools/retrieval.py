"""The miniature of the paper's Tables 2 and 8 (`make retrieval`): train the passkey family
(attention, Mamba-2 and the MMMA hybrid, parameters within 20 % of each other, and the NoPE
variants of attention and the hybrid) on passkey at one length, evaluate each at 1, 2, 4, 8 and
16 times that length and five needle depths, and print the tables docs/benchmarks.md shows.

    python -m tools.retrieval [--recipes passkey_attn,...] [--steps 3000 | R=N,...]
        [--stop-at 0.95] [--seq-len 128] [--objective blocks|frontier] [--jobs 2] [--out DIR]
        [--store DIR]

Training runs as `fsc train` (one process per recipe, `--jobs` at a time, one torch thread
each), stopping at the first in-loop eval whose exact match reaches --stop-at, and evaluation
as `fsc eval`; both record their runs in the store, and the tables are read back from it.
`--skip-train` evaluates checkpoints already under --out; `--tables-only` prints the tables
from the newest runs in the store.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import duckdb

from fsc.store import Store

FSC = [sys.executable, "-m", "fsc"]
RECIPES = ["passkey_attn", "passkey_mamba", "passkey_hybrid", "passkey_attn_nope",
           "passkey_hybrid_nope"]
RATIOS = [1, 2, 4, 8, 16]
DEPTHS = "0,0.25,0.5,0.75,1"


def _run(args: list[str]) -> dict:
    """`fsc ARGS --json` in a new process, one torch thread; its JSON document."""
    env = {**os.environ, "FSC_THREADS": "1"}
    res = subprocess.run([*FSC, *args, "--json"], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"fsc {' '.join(args)} failed: {res.stderr.strip()[-400:]}")
    return json.loads(res.stdout)


def _steps(text: str, recipes: list[str]) -> dict[str, int]:
    """'3000' (every recipe) or 'passkey_attn=3000,passkey_mamba=4000,...'."""
    if "=" not in text:
        return dict.fromkeys(recipes, int(text))
    given = {k: int(v) for k, v in (part.split("=") for part in text.split(","))}
    return {r: given[r] for r in recipes}


def train(recipe: str, a) -> None:
    t0 = time.perf_counter()
    steps = a.steps[recipe]
    doc = _run(["train", recipe, "--data", "passkey", "--seq-len", str(a.seq_len),
                "--steps", str(steps), "--batch", str(a.batch), "--lr", str(a.lr),
                "--weighting", a.weighting, "--objective", a.objective, "--seed", str(a.seed),
                "--eval-every", str(a.eval_every), "--stop-at", str(a.stop_at),
                "--out", str(a.out / recipe), "--store", str(a.store)])
    print(f"trained {recipe}: {doc['step']} steps, {time.perf_counter() - t0:.0f} s, loss "
          f"{doc['final_loss']:.4f}", flush=True)


def evaluate(recipe: str, a) -> None:
    lengths = ",".join(str(a.seq_len * r) for r in RATIOS)
    doc = _run(["eval", str(a.out / recipe), "--lengths", lengths, "--depths", DEPTHS,
                "--samples", str(a.samples), "--store", str(a.store)])
    print(f"evaluated {recipe}: run {doc['run_id']}", flush=True)


class _Reader:
    """Read-only SQL with parameters on the store's file (fsc query takes no parameters)."""

    def __init__(self, store: Path):
        self.con = duckdb.connect(str(Store(store).file), read_only=True)

    def query(self, sql: str, params: list) -> tuple[None, list[tuple]]:
        return None, self.con.execute(sql, params).fetchall()


def _latest_runs(st: _Reader, kind: str, recipes: list[str]) -> dict[str, str]:
    """The newest finished run of `kind` per recipe in the store."""
    _, rows = st.query("select json_extract_string(config, '$.recipe'), run_id from runs where"
                       " kind = ? and status = 'finished' order by started_at", [kind])
    found = dict(rows)
    return {r: found[r] for r in recipes if r in found}


def tables(a, recipes: list[str]) -> str:
    """The tables of docs/benchmarks.md section 9, from the newest train and eval runs of each
    recipe in the store."""
    st = _Reader(a.store)
    lines = ["| recipe | steps | wall time | tokens/s | last loss | in-loop accuracy (last) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r, run in _latest_runs(st, "train", recipes).items():
        _, [(steps, wall, rate, loss, acc)] = st.query(
            "select max(step), max(elapsed_s), max(tokens) / max(elapsed_s),"
            " last(loss order by step), last(eval_accuracy order by step)"
            " filter (where eval_accuracy is not null) from training where run_id = ?", [run])
        lines.append(f"| {r} | {steps} | {wall:.0f} s | {rate:.0f} | {loss:.4f} | "
                     f"{'-' if acc is None else f'{acc:.2f}'} |")
    evals = _latest_runs(st, "eval", recipes)
    head = " | ".join(f"{x}×" for x in RATIOS)
    lines += ["", f"Exact match of the whole key (digits right in brackets), mean over the five "
              f"depths, {a.samples} prompts each, by length ÷ training length ({a.seq_len}):", "",
              f"| backbone | {head} |", "| --- |" + " ---: |" * len(RATIOS)]
    for r, run in evals.items():
        _, rows = st.query("select length_ratio, avg(accuracy), avg(token_accuracy) from"
                           " evaluation where run_id = ? group by length_ratio"
                           " order by length_ratio", [run])
        lines.append(f"| {r} | " + " | ".join(f"{acc:.2f} ({tok:.2f})" for _, acc, tok in rows)
                     + " |")
    for ratio in (2, 4):
        lines += ["", f"By needle depth at {ratio}× the training length, exact match (digits "
                  "right):", "", "| backbone | " + " | ".join(DEPTHS.split(",")) + " |",
                  "| --- |" + " ---: |" * 5]
        for r, run in evals.items():
            _, rows = st.query("select depth, accuracy, token_accuracy from evaluation where"
                               " run_id = ? and length_ratio = ? order by depth", [run, float(ratio)])
            lines.append(f"| {r} | " + " | ".join(f"{acc:.2f} ({tok:.2f})" for _, acc, tok in rows)
                         + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipes", default=",".join(RECIPES))
    # the most steps a backbone gets; --stop-at ends it sooner once it retrieves
    p.add_argument("--steps", default="3000")
    p.add_argument("--stop-at", type=float, default=0.95)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weighting", default="masked")
    # every answer block a frontier per step (docs/training.md, the blocks objective)
    p.add_argument("--objective", default="blocks", choices=["frontier", "blocks"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("runs/retrieval"))
    p.add_argument("--store", type=Path, default=Path("runs/retrieval/store"))
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--tables-only", action="store_true",
                   help="print the tables from the newest runs in --store; run nothing")
    a = p.parse_args()
    recipes = a.recipes.split(",")
    a.steps = _steps(a.steps, recipes)
    if not a.tables_only:
        with ThreadPoolExecutor(a.jobs) as pool:
            if not a.skip_train:
                list(pool.map(lambda r: train(r, a), recipes))
            list(pool.map(lambda r: evaluate(r, a), recipes))
        print()
    print(tables(a, recipes))


if __name__ == "__main__":
    main()
