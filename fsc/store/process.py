"""Is the process that started a run still alive? (A SIGKILLed run never marks itself.)"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from pathlib import Path

_CLOCK_SLACK_S = 2.0  # process start times from /proc are exact to a clock tick, not better


def _proc_stat(pid: int) -> tuple[str, float] | None:
    """(state letter, start time as epoch seconds) from Linux /proc, or None elsewhere."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError):
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may contain spaces
    return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def process_state(pid: int | None, host: str | None, started_at: datetime) -> str:
    """'alive', 'dead' or 'unknown' (another host, or no pid) for a run's process.

    A pid that exists but belongs to a zombie, or to a process that started after the run did
    (the pid was reused), counts as dead.
    """
    if pid is None or host != socket.gethostname():
        return "unknown"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        pass  # exists, owned by someone else
    stat = _proc_stat(pid)
    if stat is None:
        return "alive"
    state, start = stat
    run_start = started_at.replace(tzinfo=UTC).timestamp()
    if state == "Z" or start > run_start + _CLOCK_SLACK_S:
        return "dead"
    return "alive"


def run_process(run: dict) -> str | None:
    """process_state of a run (a `runs` row: status, pid, host, started_at, resumed_at) still
    marked running, checked since it last began; None for one that ended."""
    if run["status"] != "running":
        return None
    return process_state(run["pid"], run["host"], run["resumed_at"] or run["started_at"])
