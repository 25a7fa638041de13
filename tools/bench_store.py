"""Store benchmark: query and write latency on a store holding many raw samples.

    python -m tools.bench_store --rows 1000000

Builds a throw-away store in a temp dir (bulk INSERT ... SELECT, not the per-point API), then
times typical `fsc query` invocations both in-process (Store.query: open, run, fetch, close)
and as a subprocess (`python -m fsc query ...`: what a user waits for), plus `Store.add_point`
on the full store. Medians over --repeats. Progress on stderr; the last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fsc.provenance import host_cpu
from fsc.store import Store
from fsc.store.connect import utcnow
from tools.options import boundary, positive
from tools.timing import median_s

SAMPLES_PER_POINT = 50  # 40 step + 10 fold repeats
QUERIES = {
    "count_samples": "select count(*) from samples",
    "profile_summary": (
        'select recipe, "S", "B", median(step_ms) as step_ms, max(peak_bytes) as peak_bytes'
        " from profile where status = 'ok' group by all order by all"
    ),
    "sample_quantiles": (
        'select p.recipe, p."S", quantile_cont(s.ms, [0.1, 0.5, 0.9]) as q'
        " from samples s join profile_points p using (point_id) where s.phase = 'step'"
        " group by all order by all"
    ),
    "one_point_samples": "select ms from samples where point_id = {point} order by phase, idx",
}
ONE_POINT = 4242  # the point one_point_samples reads, or the last where there are fewer


def queries(points: int) -> dict[str, str]:
    """QUERIES on a store of `points` points: the one-point query reads one that is there."""
    return {name: sql.format(point=min(ONE_POINT, points)) for name, sql in QUERIES.items()}


def build(st: Store, rows: int) -> int:
    """Fill `st` with `rows` samples, SAMPLES_PER_POINT a point (the last point takes what is
    left), every sample under a point; return the points."""
    points = -(-rows // SAMPLES_PER_POINT)
    for i in range(4):  # the recipes the points name (a --write that leaves a row without its
        # recipe is refused)
        st.register_recipe(f"recipe_{i}", f"hash_{i}", f"name: recipe_{i}\n", ["attention"])
    run_id = st.start_run("profile", "bench_store", None, {"rows": rows})
    now = utcnow()
    st.query(
        f"""
        INSERT INTO profile_points (run_id, recipe, recipe_hash, "S", "B", "G", "K", dtype,
            backend, device, status, step_ms, fold_ms, tokens_per_s, peak_bytes, cache_bytes,
            started_at, ended_at)
        SELECT '{run_id}', 'recipe_' || (i % 4), 'hash_' || (i % 4), 1024 << (i % 9),
            1 << (i % 4), 32, 4, 'bf16', 'torch', 'cpu', 'ok', 1 + random() * 10,
            1 + random() * 5, 1000 * random(), (1 << 30) + i, (1 << 20) * (i % 9),
            TIMESTAMP '{now}', TIMESTAMP '{now}'
        FROM range({points}) t(i)
        """,
        write=True,
    )
    st.query(
        f"""
        INSERT INTO samples
        SELECT (SELECT min(point_id) FROM profile_points) + i // {SAMPLES_PER_POINT},
            CASE WHEN i % {SAMPLES_PER_POINT} < 40 THEN 'step' ELSE 'fold' END,
            i % {SAMPLES_PER_POINT}, 1 + random() * 10
        FROM range({rows}) t(i)
        """,
        write=True,
    )
    st.finish_run(run_id)
    return points


def _fsc(*args: str) -> None:
    """`fsc ARGS` in a new process, its output dropped; a failure ends the tool in one line."""
    res = subprocess.run([sys.executable, "-m", "fsc", *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    if res.returncode != 0:
        said = " ".join(res.stderr.split())[-400:]
        raise SystemExit(f"fsc {' '.join(args)} failed (exit {res.returncode}): {said}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.bench_store",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=positive, default=1_000_000,
                    help=f"raw sample rows to store, {SAMPLES_PER_POINT} a point (default "
                    "1000000)")
    ap.add_argument("--repeats", type=positive, default=5,
                    help="timed repeats per measurement (add_point: 4 times as many; default 5)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="fsc-bench-store-") as tmp:
        store = Path(tmp)
        st = Store(store)
        t0 = time.perf_counter()
        points = build(st, args.rows)
        build_s = time.perf_counter() - t0
        print(f"built {args.rows} samples / {points} points in {build_s:.2f} s", file=sys.stderr)

        result: dict = {
            "rows": args.rows, "points": points, "repeats": args.repeats,
            "build_s": round(build_s, 3), "store_bytes": st.file.stat().st_size,
            "cpu": host_cpu()[0], "cpus": os.cpu_count(),
            "fsc_version_subprocess_ms": round(
                1e3 * median_s(lambda: _fsc("--version"), args.repeats), 1),
            "queries": {},
        }
        for name, sql in queries(points).items():
            inproc = median_s(lambda sql=sql: st.query(sql), args.repeats)
            sub = median_s(
                lambda sql=sql: _fsc("query", sql, "--format", "csv", "--store", tmp),
                args.repeats,
            )
            result["queries"][name] = {"in_process_ms": round(1e3 * inproc, 1),
                                       "subprocess_ms": round(1e3 * sub, 1)}
            print(f"{name:18s} in-process {1e3 * inproc:8.1f} ms   subprocess {1e3 * sub:8.1f} ms",
                  file=sys.stderr)
        result["runs_subprocess_ms"] = round(
            1e3 * median_s(lambda: _fsc("runs", "--json", "--store", tmp), args.repeats), 1)

        run_id = st.start_run("profile", "bench_store add_point", None, {})
        point = {"recipe": "r", "S": 1024, "B": 1, "step_ms": 1.0}
        samples = {"step": [1.0] * 40, "fold": [1.0] * 10}
        add = median_s(lambda: st.add_point(run_id, point, samples), 4 * args.repeats)
        result["add_point_ms"] = round(1e3 * add, 1)
        print(f"add_point (50 samples) {1e3 * add:.1f} ms", file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    boundary(main, "python -m tools.bench_store")
