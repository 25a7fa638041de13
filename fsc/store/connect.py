"""Short-lived DuckDB connections under the store's lock, with a bounded, jittered retry.

DuckDB lets one process at a time open a database file for writing, and a read-only
connection in another process conflicts with that writer too; a second opener fails at once
with a lock error. So nothing in fsc holds a connection: each write or query opens one, does
its work, closes it, and an opener that finds the file locked backs off and tries again.

DuckDB's own lock is not enough to make that safe. DuckDB 2 reads the file's header (which
names the current checkpoint) while it checks the file's type, before it locks the file, and
loads the database from those bytes. A process that another one's checkpoint overtakes in
between loads the older checkpoint: it does not see the transactions committed since, hands
out sequence values again, and its own checkpoint on close overwrites theirs, so they are lost
without an error. Hence every connection fsc opens first takes an advisory lock on a file
beside the database (`<file>.lock`), shared to read and exclusive to write, and keeps it until
the connection, and the checkpoint DuckDB runs when it closes, are done: no fsc process can
checkpoint between another's reading of the header and its lock.
"""

from __future__ import annotations

import fcntl
import os
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import duckdb

from fsc.errors import StoreError

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 60.0
WAIT_NOTE_S = 3.0  # a wait this long is said on a terminal's stderr, once
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


def interruptible(con: duckdb.DuckDBPyConnection, work: Callable[[], T]) -> T:
    """Run `work` (calls on `con`) in a thread of its own while this one waits, so that Ctrl-C
    or a stop signal stops it at once: DuckDB sees a signal only while it hands rows over, so a
    long aggregate or sort run by the signalled thread ran to its end first. On a signal (or
    anything else raised here) the query is interrupted, its thread is awaited (a write rolls
    back there), and the signal is raised."""
    done: dict[str, object] = {}
    # held while `work` runs: a Thread.join that a signal interrupts may leave the thread
    # marked as ended though it runs on (Python 3.11), a plain lock's acquire does not
    running = threading.Lock()
    running.acquire()

    def run() -> None:
        try:
            done["value"] = work()
        except BaseException as e:  # noqa: BLE001 -- handed to the waiting thread, raised there
            done["error"] = e
        finally:
            running.release()

    threading.Thread(target=run, name="fsc-query", daemon=True).start()
    try:
        while not running.acquire(timeout=0.1):
            pass
    except BaseException:
        con.interrupt()
        running.acquire()
        raise
    if "error" in done:
        raise done["error"]
    return done["value"]


def _is_lock_error(e: duckdb.Error) -> bool:
    return isinstance(e, duckdb.IOException) and "lock" in str(e).lower()


def _lock_file(file: Path, read_only: bool) -> int | None:
    """A descriptor of `file`'s lock file, created if missing. None for a reader where it is
    missing and cannot be created: a folder this user may not write to, where no fsc writer of
    this user can be at work either."""
    lock = file.with_name(file.name + ".lock")
    try:
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        pass
    try:
        return os.open(lock, os.O_RDONLY)  # flock needs no write access
    except OSError as e:
        if read_only:
            return None
        raise StoreError(f"cannot open the store's lock file {lock}: {e.strerror}") from e


def _try_lock(fd: int | None, read_only: bool) -> bool:
    """Take the lock on `fd` (shared to read, exclusive to write) if it is free now."""
    if fd is None:
        return True
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if read_only else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@contextmanager
def connect(
    file: Path, *, read_only: bool, timeout_s: float = DEFAULT_TIMEOUT_S,
    sandbox: bool = False, allowed_dir: Path | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """Open `file` under its lock (see the module docstring), retrying while another process
    holds it, and always close it before the lock is let go.

    With `sandbox`, the connection reaches nothing but the store (SANDBOX), except the folder
    `allowed_dir` when given: the one place a result may be written to (see export.py).
    DuckDB accepts allowed_directories only while external access is still on, so that case
    opens with extensions off, then allows the folder, turns external access off and locks.
    Every connection has DuckDB's progress bar off: it writes to stdout during a query slower
    than two seconds, into whatever `fsc query` prints (a session setting, so it is set before
    the sandbox locks the configuration).
    """
    config = dict(SANDBOX) if sandbox else {}
    if sandbox:
        del config["lock_configuration"]
    if allowed_dir is not None:
        assert sandbox, "allowed_dir only loosens a sandbox"
        del config["enable_external_access"]
    lock = _lock_file(file, read_only)
    try:
        con = _open(file, lock, read_only, config, timeout_s)
        try:
            con.execute("SET enable_progress_bar = false")
            if allowed_dir is not None:  # the trailing separator keeps sibling prefixes out
                con.execute(f"SET allowed_directories = [{_literal(str(allowed_dir) + os.sep)}]")
                con.execute("SET enable_external_access = false")
            if sandbox:
                con.execute("SET lock_configuration = true")
            yield con
        finally:
            con.close()  # a writer's checkpoint runs here, still under the lock
    finally:
        if lock is not None:
            os.close(lock)  # releases the lock


def _open(
    file: Path, lock: int | None, read_only: bool, config: dict, timeout_s: float
) -> duckdb.DuckDBPyConnection:
    """Take the store's lock, then DuckDB's, backing off while another process holds either."""
    start = time.monotonic()
    deadline = start + timeout_s
    delay = _FIRST_DELAY_S
    noted = False
    while True:
        if not _try_lock(lock, read_only):
            why = "another fsc process is using it"
        else:
            try:
                return duckdb.connect(str(file), read_only=read_only, config=config)
            except duckdb.Error as e:
                if not _is_lock_error(e):
                    raise StoreError(f"cannot open store {file}: {one_line(e)}") from e
                why = one_line(e)  # a process outside fsc holds DuckDB's lock
                if lock is not None:
                    fcntl.flock(lock, fcntl.LOCK_UN)
        left = deadline - time.monotonic()
        if left <= 0:
            raise StoreError(
                f"store {file} stayed locked by another process for {timeout_s:.0f} s ({why})")
        if not noted and time.monotonic() - start >= WAIT_NOTE_S and sys.stderr.isatty():
            noted = True  # at a terminal a silent wait looks like a hang
            print(f"waiting for store {file}: {why} (up to {timeout_s:g} s in all)",
                  file=sys.stderr, flush=True)
        time.sleep(min(left, delay * random.uniform(0.5, 1.5)))
        delay = min(2 * delay, _MAX_DELAY_S)
