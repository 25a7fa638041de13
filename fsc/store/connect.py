"""Short-lived DuckDB connections with a bounded, jittered retry on the file lock.

DuckDB lets one process at a time open a database file for writing, and a read-only
connection in another process conflicts with that writer too; a second opener fails at once
with a lock error. So nothing in fsc holds a connection: each write or query opens one, does
its work, closes it, and an opener that finds the file locked backs off and tries again.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from fsc.errors import StoreError

DEFAULT_TIMEOUT_S = 60.0
_FIRST_DELAY_S = 0.005
_MAX_DELAY_S = 0.1

# What a connection that runs a user's SQL may reach besides the store's own files: nothing. No
# file outside the store (COPY, read_csv, glob, ATTACH, EXPORT DATABASE, ...), no extension
# installed or loaded, and the configuration locked so that SQL cannot switch any of it back.
SANDBOX = {
    "enable_external_access": False,
    "lock_configuration": True,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}


def utcnow() -> datetime:
    """Now in UTC, without a zone: what every TIMESTAMP column holds."""
    return datetime.now(UTC).replace(tzinfo=None)


def one_line(e: BaseException) -> str:
    """A DuckDB message on one line: drop the caret context, join the hint."""
    lines = []
    for line in str(e).splitlines():
        if line.startswith("LINE "):
            break
        if line.strip():
            lines.append(line.strip())
    return " ".join(lines) or type(e).__name__


def _is_lock_error(e: duckdb.Error) -> bool:
    return isinstance(e, duckdb.IOException) and "lock" in str(e).lower()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@contextmanager
def connect(
    file: Path, *, read_only: bool, timeout_s: float = DEFAULT_TIMEOUT_S,
    sandbox: bool = False, allowed_dir: Path | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open `file`, retrying while another process holds the lock, and always close it.

    With `sandbox`, the connection reaches nothing but the store (SANDBOX), except the folder
    `allowed_dir` when given: the one place a result may be written to (see export.py).
    DuckDB accepts allowed_directories only while external access is still on, so that case
    opens with extensions off, then allows the folder, turns external access off and locks.
    """
    config = dict(SANDBOX) if sandbox else {}
    if allowed_dir is not None:
        assert sandbox, "allowed_dir only loosens a sandbox"
        del config["enable_external_access"], config["lock_configuration"]
    deadline = time.monotonic() + timeout_s
    delay = _FIRST_DELAY_S
    while True:
        try:
            con = duckdb.connect(str(file), read_only=read_only, config=config)
            break
        except duckdb.Error as e:
            if not _is_lock_error(e):
                raise StoreError(f"cannot open store {file}: {one_line(e)}") from e
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreError(
                    f"store {file} stayed locked by another process for {timeout_s:.0f} s"
                    f" ({one_line(e)})"
                ) from e
            time.sleep(min(left, delay * random.uniform(0.5, 1.5)))
            delay = min(2 * delay, _MAX_DELAY_S)
    try:
        if allowed_dir is not None:  # the trailing separator keeps sibling prefixes out
            con.execute(f"SET allowed_directories = [{_literal(str(allowed_dir) + os.sep)}]")
            con.execute("SET enable_external_access = false")
            con.execute("SET lock_configuration = true")
        yield con
    finally:
        con.close()
