"""Store stress check: concurrent writers and readers lose no row.

    python -m tools.stress_store --writers 8 --points 4 --rounds 50

Each round starts a fresh store, then `--writers` processes at once, each as a sweep does it
(Store.start_run, one Store.add_point per point, Store.finish_run with the point ids, which
checks they are all stored), while this process queries the store read-only in a loop, like
`fsc query`. After the round every run must be finished and hold all its points. No torch, so
many rounds fit where full sweeps would not.

A failed round is diagnosed, so that the ways a row can go missing are told apart:
- `ids_returned_twice`: point ids add_point returned to two writers. The sequence went back,
  so a committed transaction was undone: some process loaded an older state of the store.
- `missing`: for each id a writer got that its run lacks, whether a full scan finds the row
  (`scan`) and whether a primary-key lookup does (`index`): a row the index hides is found by
  the scan only, a lost row by neither; `held_by`: the writers whose row has that id now.
- `store`: rows by full scan, max(point_id), the sequence's last value, a WAL left beside
  the file; or `unreadable`: the file itself is broken; `errors`: what the writers raised.
With --delay-lock MS (Linux, a C compiler) every writer sleeps up to MS ms, at random, between
DuckDB's reading of the store's header and its lock on the file (tools/delay_lock.py): the
race that fsc's own lock closes (fsc/store/connect.py) is then hit in most rounds instead of
only on a loaded machine, so the check does not depend on the machine being busy.

A round fails on any of these, on a writer's error and on a read's: an I/O error, or a lock
wait longer than --timeout (a heavily loaded machine can make eight writers wait that long);
`rounds_losing_rows` counts the rounds with missing ids, ids returned twice or a broken file. The first failed
round ends the check (exit 1) unless --keep-going; --keep DIR copies each failed round (store
and writer records) there. --seconds bounds the time. The last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from fsc.errors import StoreError
from fsc.store import Store
from fsc.store.connect import DEFAULT_TIMEOUT_S
from tools import delay_lock
from tools.options import count, positive


def _writer(store: str, name: str, points: int, timeout_s: float, record: str) -> None:
    """One sweep's writes; what the store returned goes to `record` (JSON), even on error."""
    st = Store(store, timeout_s=timeout_s)
    got: dict = {"name": name, "ids": []}
    try:
        got["run_id"] = st.start_run("profile", f"stress {name}", None, {"recipes": [name]})
        for i in range(points):
            got["ids"].append(st.add_point(
                got["run_id"], {"recipe": name, "S": 16 * (i + 1), "B": 1, "step_ms": 1.0},
                {"step": [1.0, 1.1]}))
        st.finish_run(got["run_id"], points=got["ids"])
    except Exception as e:
        got["error"] = f"{type(e).__name__}: {e}"
        raise
    finally:
        Path(record).write_text(json.dumps(got))


def _diagnose(store: Path, records: list[dict]) -> dict:
    """What the store holds of the ids the writers got (see the module docstring)."""
    st = Store(store)
    returned = Counter(pid for r in records for pid in r["ids"])
    got = {"ids_returned_twice": sorted(pid for pid, n in returned.items() if n > 1),
           "missing": [], "errors": [f"{r['name']}: {r['error']}" for r in records if "error" in r]}
    try:
        for r in records:
            if "run_id" not in r:
                continue
            # run_id has no index in profile_points: this is a full scan
            _, [(scanned,)] = st.query(
                f"select list(point_id) from profile_points where run_id = '{r['run_id']}'")
            for pid in sorted(set(r["ids"]) - set(scanned or [])):
                mine = f"point_id = {pid} and run_id = '{r['run_id']}'"
                _, [(by_scan, held_by)] = st.query(
                    f"select count(*) filter (where {mine}), list(recipe) filter"
                    f" (where point_id = {pid}) from profile_points")
                _, [(by_index,)] = st.query(f"select count(*) from profile_points where {mine}")
                got["missing"].append({"run": r["name"], "point_id": pid, "scan": by_scan,
                                       "index": by_index, "held_by": held_by})
        _, [(rows, top)] = st.query("select count(*), max(point_id) from profile_points")
        _, [(last,)] = st.query("select last_value from duckdb_sequences()"
                                " where sequence_name = 'point_id_seq'")
    except StoreError as e:  # the file itself is broken
        got["unreadable"] = str(e)
        return got
    got["store"] = {"rows": rows, "ids_returned": sum(returned.values()), "max_point_id": top,
                    "sequence_last_value": last, "wal": (store / "fsc.duckdb.wal").exists()}
    return got


def _round(folder: Path, writers: int, points: int, timeout_s: float) -> dict:
    store = folder / "store"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(store), f"r{i}", points, timeout_s,
                                               str(folder / f"r{i}.json")))
             for i in range(writers)]
    for p in procs:
        p.start()
    reads, read_errors = 0, set()
    while any(p.is_alive() for p in procs):
        if (store / "fsc.duckdb").exists():  # whole once there: it is hard-linked into place
            try:
                Store(store, timeout_s=timeout_s).query("select count(*) from profile")
                reads += 1
            except StoreError as e:
                read_errors.add(str(e))
        time.sleep(0.01)
    for p in procs:
        p.join()
    got = {"exit_codes": [p.exitcode for p in procs], "reads": reads,
           "read_errors": sorted(read_errors), "runs": 0, "lost": []}
    try:
        _, rows = Store(store).query(
            "select r.run_id, r.status, count(p.point_id) from runs r"
            " left join profile_points p using (run_id) group by all")
        got["runs"] = len(rows)
        got["lost"] = [(run, status, n) for run, status, n in rows
                       if status != "finished" or n != points]
    except StoreError as e:
        got["lost"] = [str(e)]
    if got["lost"] or read_errors or any(got["exit_codes"]) or got["runs"] != writers:
        records = [json.loads(f.read_text()) for f in sorted(folder.glob("r*.json"))]
        got["diagnosis"] = _diagnose(store, records)
    return got


def _rounds(args: argparse.Namespace, t0: float) -> tuple[list[dict], int]:
    """Run the rounds `args` asks for; return the failed ones and how many ran."""
    failed, n = [], 0
    while n < args.rounds and (args.seconds is None or time.perf_counter() - t0 < args.seconds):
        n += 1
        with tempfile.TemporaryDirectory() as tmp:
            got = _round(Path(tmp), args.writers, args.points, args.timeout)
            if "diagnosis" in got and args.keep:
                shutil.copytree(tmp, args.keep / f"round{n}", dirs_exist_ok=True)
        print(f"round {n}: {got['runs']} runs, {got['reads']} reads"
              + (f", LOST {json.dumps(got)}" if "diagnosis" in got else ""), file=sys.stderr)
        if "diagnosis" in got:
            failed.append({"round": n, **got})
            if not args.keep_going:
                break
    return failed, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.stress_store",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--writers", type=positive, default=8, help="writer processes a round")
    ap.add_argument("--points", type=count, default=4, help="points each writer adds")
    ap.add_argument("--rounds", type=positive, default=50)
    ap.add_argument("--seconds", type=float, help="start no round after this many seconds")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                    help="how long a connection waits for the store's lock (fsc's default)")
    ap.add_argument("--keep-going", action="store_true", help="run every round, count failures")
    ap.add_argument("--keep", type=Path, help="copy each failed round's folder here")
    ap.add_argument("--delay-lock", type=positive, metavar="MS",
                    help="writers wait up to MS ms between DuckDB's header read and its lock "
                    "(Linux, needs cc)")
    args = ap.parse_args(argv)
    if args.delay_lock and not delay_lock.available():
        ap.error("--delay-lock needs Linux and a C compiler (cc) for its LD_PRELOAD shim")
    with tempfile.TemporaryDirectory() as shim_dir:
        if args.delay_lock:  # the spawned writers inherit it; this process does not load it
            os.environ.update(delay_lock.environ(delay_lock.build(Path(shim_dir)),
                                                 args.delay_lock, random=True))
        t0 = time.perf_counter()
        failed, n = _rounds(args, t0)
    losing = [f["round"] for f in failed if f["diagnosis"]["missing"]
              or f["diagnosis"]["ids_returned_twice"] or "unreadable" in f["diagnosis"]]
    print(json.dumps({"writers": args.writers, "points": args.points, "rounds": n,
                      "delay_lock_ms": args.delay_lock, "timeout_s": args.timeout,
                      "failed_rounds": len(failed), "rounds_losing_rows": len(losing),
                      "seconds": round(time.perf_counter() - t0), "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
