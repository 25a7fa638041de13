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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from fsc.errors import NothingToDo, QueryError, StoreError, StorePathError, UsageError
from fsc.store import export as exporting
from fsc.store import sandbox
from fsc.store.connect import DEFAULT_TIMEOUT_S, connect, one_line, utcnow
from fsc.store.migrations import MIGRATIONS, add_columns, migrate
from fsc.store.process import process_state
from fsc.store.sandbox import READ_ONLY_MESSAGE
from fsc.store.schema import SCHEMA, Column
from fsc.store.session import RunSession

DB_NAME = "fsc.duckdb"

RUN_END_STATUSES = ("finished", "failed", "interrupted")
# What `fsc runs` shows: a run still marked running whose process is gone is "dead".
RUN_LIST_STATUSES = ("running", "dead", *RUN_END_STATUSES)
POINT_STATUSES = ("ok", "oom", "error")
SAMPLE_PHASES = ("step", "fold")
ARTIFACT_ACTIONS = ("saved", "pushed", "pulled")

POINT_FIELDS = tuple(c for c in SCHEMA["profile_points"].columns if c not in ("point_id", "run_id"))
ENV_FIELDS = tuple(c for c in SCHEMA["environments"].columns if c not in ("env_id", "first_seen"))
ARTIFACT_FIELDS = tuple(SCHEMA["artifacts"].columns)
# Tables `add_rows` appends to, with the columns a caller may give.
ROW_TABLES = {t: tuple(c for c in SCHEMA[t].columns if c not in ("run_id", "recorded_at"))
              for t in ("train_steps", "eval_cells")}
_TIMESTAMPS = {"started_at", "resumed_at", "ended_at", "created_at"}
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

    def check(self, write: bool = False) -> None:
        """Raise StorePathError (one line, exit 2) unless a store can be read here and, with
        `write`, created or written: the path is (or can become) a directory, and fsc.duckdb,
        when there, is a DuckDB database file fsc may read (and write). Cheap: commands call
        it before any work. A missing store passes (reads then say there is none)."""
        try:
            where = self.dir
            while not where.exists() and where != where.parent:  # nearest existing folder
                where = where.parent
            if not where.is_dir():
                what = "is" if where == self.dir else f"cannot be created: {where} is"
                raise StorePathError(f"store {self.dir} {what} not a directory (--store and "
                                     f"$FSC_STORE name the folder that holds {DB_NAME})")
            if self.file.exists():
                if not self.file.is_file():
                    raise StorePathError(f"store {self.file} is not a file")
                with self.file.open("rb") as f:
                    head = f.read(12)
                if head[8:12] != b"DUCK":
                    raise StorePathError(f"store {self.file} is not a DuckDB database file")
            writable = self.file if self.file.exists() else where
            if write and not os.access(writable, os.W_OK):
                raise StorePathError(f"store {self.dir}: {writable} is not writable")
            if write and not os.access(where, os.W_OK | os.X_OK):  # DuckDB writes a WAL beside
                raise StorePathError(f"store {self.dir}: folder {where} is not writable")
        except OSError as e:
            raise StorePathError(f"store {self.dir}: {e.strerror or e}") from e

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
            for leftover in (tmp, *(tmp.with_name(tmp.name + end) for end in (".wal", ".lock"))):
                leftover.unlink(missing_ok=True)
        return applied

    @contextmanager
    def _open(
        self, *, write: bool, sandbox: bool = False, allowed_dir: Path | None = None
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.exists():
            if not write:
                raise StoreError(f"no store at {self.dir} yet (it is created by the first run)")
            self._create()
        if not write and not self._migrated:
            self._upgrade()
        with connect(self.file, read_only=not write, timeout_s=self.timeout_s,
                     sandbox=sandbox, allowed_dir=allowed_dir) as con:
            if write and not self._migrated:
                migrate(con)
                self._migrated = True
            yield con

    def _upgrade(self) -> None:
        """Before the first read, the migrations a store written by an older fsc lacks (its
        readers name today's columns); a store fsc may not write is read as it is."""
        with connect(self.file, read_only=True, timeout_s=self.timeout_s) as con:
            (done,) = con.execute("SELECT count(*) FROM schema_migrations").fetchone()
        if done < len(MIGRATIONS) and os.access(self.file, os.W_OK):
            self.migrate()
        self._migrated = True

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

    def start_run(self, kind: str, command: str, env_id: str | None, config: dict,
                  started: datetime | None = None) -> str:
        """Record a new run in status 'running'; return its run_id. `started`: when its work
        began, if before now (a model loaded first); now else."""
        now = utcnow()
        run_id = f"{now:%Y%m%dT%H%M%S}-{secrets.token_hex(3)}"
        row = {"run_id": run_id, "kind": kind, "command": command, "status": "running",
               "started_at": started or now, "pid": os.getpid(), "host": socket.gethostname(),
               "env_id": env_id, "config": config}
        with self._transaction() as con:
            _insert(con, "runs", row)
        return run_id

    @contextmanager
    def run(self, kind: str, command: str, config: dict, *, recipes=(),
            environment: dict[str, Any] | None = None,
            resume: str | None = None, started: datetime | None = None) -> Iterator[RunSession]:
        """A run's session (fsc.store.session): `recipes` (fsc Recipe objects) and `environment`
        (fsc.provenance.environment()) registered, the run started (or profile run `resume`
        claimed again, see resume_run), and on leaving marked finished, failed or interrupted."""
        for r in recipes:
            self.register_recipe(r.name, r.recipe_hash, r.to_yaml(), r.layer_plan)
        env_id = self.register_environment(environment) if environment is not None else None
        if resume is None:
            run_id = self.start_run(kind, command, env_id, config, started)
        else:
            self.resume_run(resume, env_id, kind)
            run_id = resume
        session = RunSession(self, run_id)
        try:
            yield session
        except BaseException as e:
            session._close(e)
            raise
        session._close(None)

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

    def finish_run(self, run_id: str, status: str = "finished", error: str | None = None,
                   points: list[int] | None = None) -> None:
        """Mark a run finished, failed or interrupted. With `points` (the ids add_point returned
        to this process for the run), first check that each is in the store under the run: if
        one is not, the run is marked failed instead, naming them, and StoreError is raised (a
        row lost without an error is the worst failure a store can have)."""
        _check_choice("run status", status, RUN_END_STATUSES)
        lost: list[int] = []
        with self._transaction() as con:
            if points:
                found = {pid for (pid,) in con.execute(
                    "SELECT point_id FROM profile_points WHERE run_id = ? AND point_id IN"
                    " (SELECT unnest(?::BIGINT[]))", [run_id, list(points)]).fetchall()}
                lost = sorted(set(points) - found)
            if lost:
                status, error = "failed", (f"{len(lost)} of {len(set(points))} points this "
                                           f"process stored are missing (point ids {lost[:10]})")
            done = con.execute(
                "UPDATE runs SET status = ?, ended_at = ?, error = ? WHERE run_id = ?"
                " RETURNING run_id",
                [status, utcnow(), error, run_id],
            ).fetchall()
            if not done:
                raise ValueError(f"no run {run_id!r} in {self.file}")
        if lost:
            raise StoreError(f"run {run_id}: {error} in {self.file}; the run is marked failed")

    def add_bench(self, run_id: str, name: str, value: float, unit: str,
                  params: dict[str, Any] | None = None) -> None:
        """Record one benchmark figure (e.g. 'decode.tokens_per_s', 412.0, 'tok/s')."""
        row = {"run_id": run_id, "name": name, "params": json.dumps(params or {}, sort_keys=True),
               "value": float(value), "unit": unit, "recorded_at": utcnow()}
        with self._transaction() as con:
            _insert(con, "bench_results", row)

    def add_rows(self, table: str, run_id: str, rows: list[dict[str, Any]],
                 columns: Sequence[Column] = ()) -> None:
        """Append rows of `fsc train` (train_steps) or `fsc eval` (eval_cells) for run
        `run_id` in one transaction; missing columns are NULL. `columns` are the declared
        columns the rows may carry beyond the table's own (an eval task's), added to the table
        if it lacks them."""
        allowed = ROW_TABLES[table] + tuple(c.name for c in columns)
        for row in rows:
            _check_keys(table, row, allowed)
        with self._transaction() as con:
            if not con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone():
                raise ValueError(f"no run {run_id!r} in {self.file}")
            add_columns(con, table, columns)
            now = utcnow()
            for row in rows:
                _insert(con, table, {"run_id": run_id, **row, "recorded_at": now})

    # ---- resuming a run (`fsc profile --resume`, `fsc eval --resume`) ---------------------

    def run_config(self, run_id: str, kind: str = "profile") -> dict[str, Any]:
        """The stored config of `kind` run `run_id` if it may be resumed (see resume_run)."""
        if not self.exists():  # never create a store just to say a run is not in it
            raise UsageError(f"no run {run_id!r}: no store at {self.dir} yet")
        with self._open(write=False) as con:
            return self._resumable(con, run_id, kind)

    def resume_run(self, run_id: str, env_id: str | None, kind: str = "profile") -> dict[str, Any]:
        """Claim `kind` run `run_id` for this process and return its config: status back to
        'running' with this pid and host, and resumed_at now (the liveness check compares it
        with the process's own start; started_at stays when the run began). Check and claim are one transaction, so of two
        processes resuming one run only one wins. UsageError when the run is unknown, of
        another kind, still running, or recorded in another environment; NothingToDo when it
        finished."""
        with self._transaction_on_existing(run_id) as con:
            config = self._resumable(con, run_id, kind)
            (was,) = con.execute("SELECT env_id FROM runs WHERE run_id = ?", [run_id]).fetchone()
            if was is not None and was != env_id:
                get = f"SELECT {', '.join(ENV_FIELDS)} FROM environments WHERE env_id = ?"
                old, new = (con.execute(get, [e]).fetchone() for e in (was, env_id))
                diff = "; ".join(f"{c} {a} -> {b}" for c, a, b in zip(ENV_FIELDS, old, new,
                                                                       strict=True) if a != b)
                raise UsageError(f"run {run_id} was measured in another environment ({diff}); "
                                 "start a new run instead")
            con.execute("UPDATE runs SET status = 'running', pid = ?, host = ?, resumed_at = ?,"
                        " ended_at = NULL, error = NULL WHERE run_id = ?",
                        [os.getpid(), socket.gethostname(), utcnow(), run_id])
        return config

    def _resumable(self, con: duckdb.DuckDBPyConnection, run_id: str,
                   kind: str) -> dict[str, Any]:
        status = self._quiet_run_status(con, run_id, force=False)
        was, config = con.execute("SELECT kind, config FROM runs WHERE run_id = ?",
                                  [run_id]).fetchone()
        if was != kind:
            raise UsageError(f"run {run_id} is {'an' if was[0] in 'aeiou' else 'a'} {was} "
                             f"run; fsc {kind} --resume continues a {kind} run")
        if status == "finished":  # idempotent: a retry or a requeued job finds it done
            what = "point" if kind == "profile" else "cell"
            raise NothingToDo(f"run {run_id} finished; every {what} of it is stored: nothing "
                              "to do")
        return json.loads(config or "{}")

    def point_keys(self, run_id: str) -> dict[tuple, int]:
        """How many points run `run_id` holds at each (recipe_hash, S, B, G, K, dtype, backend,
        device): what a resumed sweep skips."""
        with self._open(write=False) as con:
            rows = con.execute("SELECT recipe_hash, S, B, G, K, dtype, backend, device, count(*)"
                               " FROM profile_points WHERE run_id = ? GROUP BY ALL",
                               [run_id]).fetchall()
        return {tuple(r[:-1]): r[-1] for r in rows}

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
        """Every artifact row, oldest first, with `recipe`: the name the store knows for its
        recipe hash (None if none); [] when the store does not exist yet."""
        if not self.exists():
            return []
        cols, rows = self.query(
            "SELECT a.*, r.name AS recipe FROM artifacts a LEFT JOIN recipes r USING (recipe_hash)"
            " ORDER BY a.created_at, a.artifact_id")
        return [dict(zip(cols, r, strict=True)) for r in rows]

    # ---- reads ---------------------------------------------------------------------------

    def query(
        self, sql: str, write: bool = False, max_rows: int | None = None
    ) -> tuple[list[str], list[tuple]]:
        """Run a user's SQL; return (column names, rows) of its last statement, at most
        `max_rows` rows; ([], []) when that statement has no result.

        The connection reaches nothing outside the store, and statements are checked by kind
        first (sandbox.py): without `write`, one reading statement; with it, all statements in
        one transaction that commits only if the store stays whole. Bad or refused SQL raises
        QueryError (one line); a store that cannot be opened, StoreError.
        """
        with self._open(write=write, sandbox=True) as con:
            try:
                return sandbox.execute(con, sql, write=write, max_rows=max_rows)
            except duckdb.Error as e:
                raise self._query_error(e) from e

    def export(self, sql: str, out: Path, force: bool = False, what: str | None = None) -> int:
        """Write the result of one read-only query to `out`, in the format its extension names
        (export.FORMATS); an existing `out` only with `force` (`what` names `out` in errors).
        Returns the bytes written. Only `out` is written: DuckDB, sandboxed, may write into a
        private folder beside it."""
        fmt = exporting.target(out, force, what)
        with exporting.private_folder(out) as folder:
            tmp = folder / f"result{out.suffix}"
            with self._open(write=False, sandbox=True, allowed_dir=folder) as con:
                try:
                    exporting.write(con, sql, tmp, fmt)
                except duckdb.Error as e:
                    raise self._query_error(e) from e
            exporting.place(tmp, out, force)
        return out.stat().st_size

    @staticmethod
    def _query_error(e: duckdb.Error) -> StoreError:
        """A DuckDB error from a user's SQL: QueryError (exit 2), unless the store itself
        failed (I/O, internal errors): StoreError."""
        if "read-only" in str(e):
            return QueryError(READ_ONLY_MESSAGE)
        if isinstance(e, duckdb.PermissionException):
            return QueryError(f"{one_line(e)} (fsc query reaches only the store; to write a "
                              "result to a file, use --out FILE or `fsc export`)")
        if isinstance(e, (duckdb.IOException, duckdb.InternalException, duckdb.FatalException)):
            return StoreError(one_line(e))
        return QueryError(one_line(e))

    def runs(
        self, limit: int = 20, *, kind: str | None = None, status: str | None = None,
        recipe: str | None = None, run_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Most recent runs first, with point counts, liveness and duration.

        Filters: `kind` ('profile', 'bench', ...); `status`, one of RUN_LIST_STATUSES, where
        'dead' is a run still marked running whose process is gone and 'running' one whose
        process is alive or on another host; `recipe`, a recipe name the run has points of or
        was asked to measure; `run_id`, that run alone.
        """
        _check_choice("run status", status, (None, *RUN_LIST_STATUSES))
        where, params = [], []
        if run_id is not None:
            where.append("r.run_id = ?")
            params.append(run_id)
        if kind is not None:
            where.append("r.kind = ?")
            params.append(kind)
        if status is not None:
            where.append("r.status = ?")
            params.append("running" if status == "dead" else status)
        if recipe is not None:
            where.append(
                "(r.run_id IN (SELECT run_id FROM profile_points WHERE recipe = ?) OR CASE"
                " WHEN json_valid(r.config) THEN list_contains("
                " json_extract_string(r.config, '$.recipes[*]'), ?)"
                " OR json_extract_string(r.config, '$.recipe') = ? ELSE false END)"
            )
            params += [recipe, recipe, recipe]
        live = status in ("running", "dead")  # told apart below, after the query
        sql = f"""
            SELECT r.run_id, r.kind, r.status, r.started_at, r.resumed_at, r.ended_at, r.pid, r.host,
                   r.command, r.error,
                   count(p.point_id) FILTER (WHERE p.status = 'ok') AS points_ok,
                   count(p.point_id) FILTER (WHERE p.status = 'oom') AS points_oom,
                   count(p.point_id) FILTER (WHERE p.status = 'error') AS points_error,
                   max(p.ended_at) AS last_point_at,
                   (SELECT count(*) FROM train_steps t WHERE t.run_id = r.run_id)
                   + (SELECT count(*) FROM eval_cells c WHERE c.run_id = r.run_id) AS rows_logged
            FROM runs r LEFT JOIN profile_points p USING (run_id)
            {"WHERE " + " AND ".join(where) if where else ""}
            GROUP BY ALL ORDER BY r.started_at DESC, r.run_id DESC
            {"" if live else f"LIMIT {int(limit)}"}
            """
        with self._open(write=False, sandbox=True) as con:
            try:
                cur = con.execute(sql, params)
                cols, rows = [d[0] for d in cur.description], cur.fetchall()
            except duckdb.Error as e:
                raise StoreError(f"reading runs from {self.file} failed: {one_line(e)}") from e
        out = []
        for values in rows:
            run = dict(zip(cols, values, strict=True))
            running = run["status"] == "running"
            run["process"] = (
                process_state(run["pid"], run["host"], run["resumed_at"] or run["started_at"])
                if running else None
            )
            if run["ended_at"] is not None:
                end = run["ended_at"]
            elif run["process"] == "alive":
                end = utcnow()
            else:
                end = run["last_point_at"]
            run["duration_s"] = (end - run["started_at"]).total_seconds() if end else None
            if not live or (run["process"] == "dead") == (status == "dead"):
                out.append(run)
        return out[:limit]

    # ---- removing and closing runs (`fsc runs rm`, `fsc runs close`) ---------------------

    def remove_run(self, run_id: str, force: bool = False) -> dict[str, int]:
        """Delete run `run_id` with its points, their samples and its benchmark figures in one
        transaction; return how many rows of each went. Refused for a run whose process is
        alive, and without `force` for one marked running on another host."""
        with self._transaction_on_existing(run_id) as con:
            self._quiet_run_status(con, run_id, force)
            points = "SELECT point_id FROM profile_points WHERE run_id = $run"
            steps = (  # samples before their points
                ("samples", f"DELETE FROM samples WHERE point_id IN ({points})"),
                ("points", "DELETE FROM profile_points WHERE run_id = $run"),
                ("bench_results", "DELETE FROM bench_results WHERE run_id = $run"),
                ("train_steps", "DELETE FROM train_steps WHERE run_id = $run"),
                ("eval_cells", "DELETE FROM eval_cells WHERE run_id = $run"),
            )
            removed = {what: con.execute(sql, {"run": run_id}).fetchone()[0]
                       for what, sql in steps}
            con.execute("DELETE FROM runs WHERE run_id = ?", [run_id])
        return removed

    def close_run(self, run_id: str, force: bool = False) -> None:
        """Mark run `run_id`, still 'running' though its process is gone, 'interrupted', ending
        at its last point (or its start). Refused when the process is alive, and without
        `force` when the run is marked running on another host (fsc cannot tell there)."""
        with self._transaction_on_existing(run_id) as con:
            status = self._quiet_run_status(con, run_id, force)
            if status != "running":
                raise UsageError(f"run {run_id} is {status}; only a running run can be closed")
            con.execute(
                "UPDATE runs SET status = 'interrupted', error = $error, ended_at = coalesce("
                " (SELECT max(ended_at) FROM profile_points WHERE run_id = $run), started_at)"
                " WHERE run_id = $run",
                {"run": run_id,
                 "error": "its process ended without closing the run (closed by fsc runs close)"},
            )

    @contextmanager
    def _transaction_on_existing(self, run_id: str) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.exists():  # never create a store just to say a run is not in it
            raise UsageError(f"no run {run_id!r}: no store at {self.dir} yet")
        with self._transaction() as con:
            yield con

    def _quiet_run_status(self, con: duckdb.DuckDBPyConnection, run_id: str, force: bool) -> str:
        """The stored status of `run_id` once it is sure no process still writes to it:
        UsageError for an unknown run, for a running one whose process is alive, and without
        `force` for one marked running on another host."""
        row = con.execute("SELECT status, pid, host, coalesce(resumed_at, started_at) FROM runs"
                          " WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise UsageError(f"no run {run_id!r} in {self.file} (`fsc runs` lists them)")
        status, pid, host, started_at = row
        process = process_state(pid, host, started_at) if status == "running" else None
        if process == "alive":
            raise UsageError(f"run {run_id} is still running (pid {pid}); stop it first")
        if process == "unknown" and not force:
            raise UsageError(f"run {run_id} is marked running on host {host}, where fsc cannot "
                             "tell whether it is alive; pass --force if it is not")
        return status
