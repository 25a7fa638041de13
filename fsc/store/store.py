"""The Store: what the profiler, the checkpoint commands and `fsc query` call.

Every method opens its own connection (see connect.py), so any number of processes can share
one store: writers take turns on the file lock and each write is one short transaction, so a
killed process loses at most the point it was writing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from fsc.errors import StoreError
from fsc.store.connect import DEFAULT_TIMEOUT_S, connect, one_line, utcnow
from fsc.store.migrations import migrate
from fsc.store.process import process_state
from fsc.store.schema import SCHEMA

DB_NAME = "fsc.duckdb"
READ_ONLY_MESSAGE = "query is read-only; pass --write to modify the store"

RUN_END_STATUSES = ("finished", "failed", "interrupted")
POINT_STATUSES = ("ok", "oom", "error")
SAMPLE_PHASES = ("step", "fold")
ARTIFACT_ACTIONS = ("saved", "pushed", "pulled")

POINT_FIELDS = tuple(c for c in SCHEMA["profile_points"].columns if c not in ("point_id", "run_id"))
ENV_FIELDS = tuple(c for c in SCHEMA["environments"].columns if c not in ("env_id", "first_seen"))
ARTIFACT_FIELDS = tuple(SCHEMA["artifacts"].columns)
_TIMESTAMPS = {"started_at", "ended_at", "created_at"}
_JSON_TEXT = {"mixer_backends", "files_sha256", "config"}


def _value(column: str, value: Any) -> Any:
    """A Python value as the column stores it: epoch seconds or aware datetimes to naive
    UTC, dicts and lists of JSON-text columns to JSON."""
    if value is None:
        return None
    if column in _TIMESTAMPS:
        if isinstance(value, (int, float)):
            return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
        if isinstance(value, datetime) and value.tzinfo is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
    if column in _JSON_TEXT and not isinstance(value, str):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, tuple):
        return list(value)
    return value


def _check_keys(what: str, given: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {what} field(s) {unknown}; allowed: {', '.join(allowed)}")


def _check_choice(what: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{what} {value!r} is not one of {', '.join(allowed)}")


def _insert(con: duckdb.DuckDBPyConnection, table: str, row: dict[str, Any], tail: str = "") -> Any:
    cols = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    values = [_value(c, v) for c, v in row.items()]
    return con.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks}) {tail}", values)


class Store:
    """A DuckDB store in directory `path` (file `fsc.duckdb`), created on the first write."""

    def __init__(self, path: str | Path, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.dir = Path(path)
        self.file = self.dir / DB_NAME
        self.timeout_s = timeout_s
        self._migrated = False

    def __repr__(self) -> str:
        return f"Store({str(self.dir)!r})"

    def exists(self) -> bool:
        return self.file.exists()

    # ---- connections ---------------------------------------------------------------------

    def _create(self) -> list[str]:
        """Create and migrate the store file atomically.

        DuckDB writes a new file's header only after opening it, so a second process opening
        the file in between reads "not a valid DuckDB database file". Build it under a
        private name and hard-link it into place; if another process won, use theirs.
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{DB_NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            with connect(tmp, read_only=False, timeout_s=self.timeout_s) as con:
                applied = migrate(con)
            try:
                os.link(tmp, self.file)
            except FileExistsError:
                return []
        finally:
            for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
                leftover.unlink(missing_ok=True)
        return applied

    @contextmanager
    def _open(self, *, write: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.exists():
            if not write:
                raise StoreError(f"no store at {self.dir} yet (it is created by the first run)")
            self._create()
        with connect(self.file, read_only=not write, timeout_s=self.timeout_s) as con:
            if write and not self._migrated:
                migrate(con)
                self._migrated = True
            yield con

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One write transaction on a fresh connection; DuckDB errors become StoreError."""
        with self._open(write=True) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException as e:
                with contextlib.suppress(duckdb.Error):  # a failed COMMIT already rolled back
                    con.execute("ROLLBACK")
                if isinstance(e, duckdb.Error):
                    raise StoreError(f"write to {self.file} failed: {one_line(e)}") from e
                raise

    def migrate(self) -> list[str]:
        """Create the store if needed and apply missing migrations; return their names."""
        applied = [] if self.exists() else self._create()
        with connect(self.file, read_only=False, timeout_s=self.timeout_s) as con:
            applied += migrate(con)
        self._migrated = True
        return applied

    # ---- writes the profiler makes -------------------------------------------------------

    def register_recipe(
        self, name: str, recipe_hash: str, yaml_text: str, layer_plan: list[str]
    ) -> None:
        """Record a recipe once per content hash (later calls are no-ops)."""
        row = {"recipe_hash": recipe_hash, "name": name, "yaml": yaml_text,
               "layer_plan": list(layer_plan), "first_seen": utcnow()}
        with self._transaction() as con:
            _insert(con, "recipes", row, "ON CONFLICT DO NOTHING")

    def register_environment(self, env: dict[str, Any]) -> str:
        """Record an environment (from fsc.provenance.environment()); return its env_id."""
        _check_keys("environment", env, ENV_FIELDS)
        canonical = json.dumps({k: env.get(k) for k in ENV_FIELDS}, sort_keys=True, default=str)
        env_id = hashlib.sha256(canonical.encode()).hexdigest()[:16]
        with self._transaction() as con:
            row = {"env_id": env_id, **env, "first_seen": utcnow()}
            _insert(con, "environments", row, "ON CONFLICT DO NOTHING")
        return env_id

    def start_run(self, kind: str, command: str, env_id: str | None, config: dict) -> str:
        """Record a new run in status 'running'; return its run_id."""
        now = utcnow()
        run_id = f"{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"
        row = {"run_id": run_id, "kind": kind, "command": command, "status": "running",
               "started_at": now, "pid": os.getpid(), "host": socket.gethostname(),
               "env_id": env_id, "config": config}
        with self._transaction() as con:
            _insert(con, "runs", row)
        return run_id

    def add_point(
        self, run_id: str, point: dict[str, Any], samples: dict[str, list[float]] | None = None
    ) -> int:
        """Record one sweep point and its raw samples in one transaction; return point_id.

        `point` holds profile_points columns (missing ones are NULL; `status` defaults to
        'ok'); `samples` maps 'step' / 'fold' to the timed repeats in ms.
        """
        _check_keys("point", point, POINT_FIELDS)
        row = {"status": "ok", **point}
        _check_choice("point status", row["status"], POINT_STATUSES)
        for phase in samples or {}:
            _check_choice("sample phase", phase, SAMPLE_PHASES)
        with self._transaction() as con:
            if not con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone():
                raise ValueError(f"no run {run_id!r} in {self.file}")
            (point_id,) = _insert(con, "profile_points", {"run_id": run_id, **row},
                                  "RETURNING point_id").fetchone()
            for phase, values in (samples or {}).items():
                if values:
                    con.execute(
                        "INSERT INTO samples"
                        " SELECT $point_id, $phase, unnest(range(len($ms))), unnest($ms)",
                        {"point_id": point_id, "phase": phase, "ms": [float(v) for v in values]},
                    )
        return point_id

    def finish_run(self, run_id: str, status: str = "finished", error: str | None = None) -> None:
        """Mark a run finished, failed or interrupted."""
        _check_choice("run status", status, RUN_END_STATUSES)
        with self._transaction() as con:
            done = con.execute(
                "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE run_id = ?"
                " RETURNING run_id",
                [status, utcnow(), error, run_id],
            ).fetchall()
            if not done:
                raise ValueError(f"no run {run_id!r} in {self.file}")

    def add_bench(self, run_id: str, name: str, value: float, unit: str,
                  params: dict[str, Any] | None = None) -> None:
        """Record one benchmark figure (e.g. 'decode.tokens_per_s', 412.0, 'tok/s')."""
        row = {"run_id": run_id, "name": name, "params": json.dumps(params or {}, sort_keys=True),
               "value": float(value), "unit": unit, "recorded_at": utcnow()}
        with self._transaction() as con:
            _insert(con, "bench_results", row)

    # ---- checkpoints ---------------------------------------------------------------------

    def register_artifact(self, **fields: Any) -> str:
        """Record a checkpoint action (artifacts columns as keywords); return artifact_id."""
        _check_keys("artifact", fields, ARTIFACT_FIELDS)
        _check_choice("artifact action", fields.get("action"), ARTIFACT_ACTIONS)
        row = {"artifact_id": secrets.token_hex(8), "created_at": utcnow(), **fields}
        with self._transaction() as con:
            _insert(con, "artifacts", row)
        return row["artifact_id"]

    def artifacts(self) -> list[dict[str, Any]]:
        """Every artifact row, oldest first ([] when the store does not exist yet)."""
        if not self.exists():
            return []
        cols, rows = self.query("SELECT * FROM artifacts ORDER BY created_at, artifact_id")
        return [dict(zip(cols, r, strict=True)) for r in rows]

    # ---- reads ---------------------------------------------------------------------------

    def query(
        self, sql: str, write: bool = False, max_rows: int | None = None
    ) -> tuple[list[str], list[tuple]]:
        """Run SQL; return (column names, rows). Read-only unless `write`.

        With `max_rows`, fetch at most that many rows. Statements without a result give
        ([], []). Errors raise StoreError with a one-line message.
        """
        with self._open(write=write) as con:
            try:
                cur = con.execute(sql)
                if cur.description is None:
                    return [], []
                cols = [d[0] for d in cur.description]
                rows = cur.fetchall() if max_rows is None else cur.fetchmany(max_rows)
            except duckdb.Error as e:
                raise self._query_error(e) from e
        return cols, rows

    def export(self, sql: str, out: Path, fmt: str, write: bool = False) -> None:
        """Write the result of SQL to `out` with DuckDB's writer: fmt 'csv' or 'parquet'."""
        with self._open(write=write) as con:
            try:
                rel = con.sql(sql)
                if rel is None:
                    raise StoreError("the statement returns no rows to write")
                if fmt == "parquet":
                    rel.write_parquet(str(out))
                else:
                    rel.write_csv(str(out), header=True)
            except duckdb.Error as e:
                raise self._query_error(e) from e

    @staticmethod
    def _query_error(e: duckdb.Error) -> StoreError:
        if "read-only" in str(e):
            return StoreError(READ_ONLY_MESSAGE)
        return StoreError(one_line(e))

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """Most recent runs first, with point counts, liveness and duration."""
        cols, rows = self.query(
            f"""
            SELECT r.run_id, r.kind, r.status, r.started_at, r.ended_at, r.pid, r.host,
                   r.command, r.error,
                   count(p.point_id) FILTER (WHERE p.status = 'ok') AS points_ok,
                   count(p.point_id) FILTER (WHERE p.status = 'oom') AS points_oom,
                   count(p.point_id) FILTER (WHERE p.status = 'error') AS points_error,
                   max(p.ended_at) AS last_point_at
            FROM runs r LEFT JOIN profile_points p USING (run_id)
            GROUP BY ALL ORDER BY r.started_at DESC, r.run_id DESC LIMIT {int(limit)}
            """
        )
        out = []
        for values in rows:
            run = dict(zip(cols, values, strict=True))
            running = run["status"] == "running"
            run["process"] = (
                process_state(run["pid"], run["host"], run["started_at"]) if running else None
            )
            if run["ended_at"] is not None:
                end = run["ended_at"]
            elif run["process"] == "alive":
                end = utcnow()
            else:
                end = run["last_point_at"]
            run["duration_s"] = (end - run["started_at"]).total_seconds() if end else None
            out.append(run)
        return out
