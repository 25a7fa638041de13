"""Store stress check: concurrent writers and readers lose no row.

    python -m tools.stress_store --writers 8 --points 4 --rounds 50

Each round starts a fresh store, then `--writers` processes at once, each as a sweep does it
(Store.start_run, one Store.add_point per point, Store.finish_run with the point ids, which
checks they are all stored), while this process queries the store read-only in a loop, like
`fsc query`. After the round every run must be finished and hold all its points. The first
round that loses a row stops the check with exit 1 and says which. The last stdout line is
JSON. No torch: a round takes about a second, so many rounds fit where a full sweep would not.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

from fsc.errors import StoreError
from fsc.store import Store


def _writer(store: str, name: str, points: int) -> None:
    st = Store(store)
    run_id = st.start_run("profile", f"stress {name}", None, {"recipes": [name]})
    ids = [st.add_point(run_id, {"recipe": name, "S": 16 * (i + 1), "B": 1, "step_ms": 1.0},
                        {"step": [1.0, 1.1]}) for i in range(points)]
    st.finish_run(run_id, points=ids)


def _round(folder: Path, writers: int, points: int) -> dict:
    store = folder / "store"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(store), f"r{i}", points))
             for i in range(writers)]
    for p in procs:
        p.start()
    reads = 0
    while any(p.is_alive() for p in procs):
        if (store / "fsc.duckdb").exists():
            try:
                Store(store).query("select count(*) from profile")
                reads += 1
            except StoreError:
                pass  # a store still being created: the writers' business
        time.sleep(0.01)
    for p in procs:
        p.join()
    _, rows = Store(store).query(
        "select r.run_id, r.status, count(p.point_id) from runs r"
        " left join profile_points p using (run_id) group by all")
    lost = [(run, status, n) for run, status, n in rows if status != "finished" or n != points]
    return {"exit_codes": [p.exitcode for p in procs], "runs": len(rows), "reads": reads,
            "lost": lost}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=50)
    args = ap.parse_args(argv)
    failed = None
    for n in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as tmp:
            got = _round(Path(tmp), args.writers, args.points)
        bad = got["lost"] or any(code != 0 for code in got["exit_codes"]) \
            or got["runs"] != args.writers
        print(f"round {n}: {got['runs']} runs, {got['reads']} reads"
              + (f", LOST {got}" if bad else ""), file=sys.stderr)
        if bad:
            failed = {"round": n, **got}
            break
    print(json.dumps({"writers": args.writers, "points": args.points, "rounds": args.rounds,
                      "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
