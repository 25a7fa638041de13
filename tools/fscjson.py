"""What the miniature tools share: fsc in a new process for its JSON document, and read-only
SQL with parameters on a store's file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fsc.store import Store
from fsc.store.connect import connect

FSC = [sys.executable, "-m", "fsc"]


def run_json(args: list[str]) -> dict:
    """`fsc ARGS --json` in a new process, one torch thread; its JSON document."""
    env = {**os.environ, "FSC_THREADS": "1"}
    res = subprocess.run([*FSC, *args, "--json"], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"fsc {' '.join(args)} failed: {res.stderr.strip()[-400:]}")
    return json.loads(res.stdout)


def plot(kind: str, runs: list[str], out: Path, store: Path) -> None:
    """`fsc plot KIND` of `runs` into `out` (replaced)."""
    run_json(["plot", kind, *(x for run in runs for x in ("--run", run)), "--force", "--out",
              str(out), "--store", str(store)])
    print(f"wrote {out}", flush=True)


class Reader:
    """Read-only SQL with parameters on the store's file (fsc query takes no parameters), a
    short connection per query under the store's lock (fsc.store.connect), so that runs
    writing to the store meanwhile (a training beside the tables) wait for it, and it for them."""

    def __init__(self, store: Path):
        self.file = Store(store).file

    def query(self, sql: str, params: list) -> tuple[None, list[tuple]]:
        with connect(self.file, read_only=True) as con:
            return None, con.execute(sql, params).fetchall()
