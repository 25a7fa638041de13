"""The Store: what the profiler, the checkpoint commands and `fsc query` call. This module holds
its core: the path check, connections, transactions and migration, the writes of recipes,
environments, points, rows, benchmark figures and artifacts, and the user's queries and exports.
The run lifecycle and the run listing are Store's too, from runs.py (RunLifecycle).

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from fsc.errors import QueryError, StoreError, StorePathError
from fsc.paths import unwritable
from fsc.store import export as exporting
from fsc.store import sandbox
from fsc.store.connect import DEFAULT_TIMEOUT_S, connect, interruptible, one_line, utcnow
from fsc.store.migrations import MIGRATIONS, add_columns, migrate
from fsc.store.rows import (
    ARTIFACT_FIELDS,
    ENV_FIELDS,
    POINT_FIELDS,
    ROW_TABLES,
    check_choice,
    check_keys,
    insert,
)
from fsc.store.runs import RunLifecycle
from fsc.store.sandbox import READ_ONLY_MESSAGE
from fsc.store.schema import Column

DB_NAME = "fsc.duckdb"

POINT_STATUSES = ("ok", "oom", "error")
SAMPLE_PHASES = ("step", "fold")
ARTIFACT_ACTIONS = ("saved", "pushed", "pulled")


class Store(RunLifecycle):
    """A DuckDB store in directory `path` (file `fsc.duckdb`), created on the first write."""

    def __init__(self, path: str | Path, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.dir = Path(path)
        self.file = self.dir / DB_NAME
        self.timeout_s = timeout_s
        self._migrated = False
        self._behind: int | None = None  # schema version of an older store fsc may not write
        self._columns: dict[str, tuple[str, ...]] = {}  # `columns`, read once

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
            if write and (why := unwritable(where)):
                raise StorePathError(f"store {self.dir}: cannot write in folder {where} ({why})")
        except OSError as e:
            raise StorePathError(f"store {self.dir}: {e.strerror or e}") from e

    # ---- connections ---------------------------------------------------------------------

    def _create(self) -> list[str]:
        """Create and migrate the store file atomically.

        DuckDB writes a new file's header only after opening it, so a second process opening
        the file in between reads "not a valid DuckDB database file". Build it under a
        private name and hard-link it into place; if another process won, use theirs.
        """
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # a file where the folder would be, a folder that cannot be made
            self.check(write=True)  # its own words where it has them
            raise StorePathError(f"store {self.dir} cannot be created ({e.strerror}; --store "
                                 f"and $FSC_STORE name the folder that holds {DB_NAME})"
                                 ) from None
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
                raise StorePathError(f"no store at {self.dir} yet (it is created by the first "
                                     "run)")
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
        elif done < len(MIGRATIONS):
            self._behind = done
        # a newer store is read as it is, but each write still runs `migrate`, which refuses it
        self._migrated = done <= len(MIGRATIONS)

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
        self._columns.clear()
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
            insert(con, "recipes", row, "ON CONFLICT DO NOTHING")

    def register_environment(self, env: dict[str, Any]) -> str:
        """Record an environment (from fsc.provenance.environment()); return its env_id."""
        check_keys("environment", env, ENV_FIELDS)
        canonical = json.dumps({k: env.get(k) for k in ENV_FIELDS}, sort_keys=True, default=str)
        env_id = hashlib.sha256(canonical.encode()).hexdigest()[:16]
        with self._transaction() as con:
            row = {"env_id": env_id, **env, "first_seen": utcnow()}
            insert(con, "environments", row, "ON CONFLICT DO NOTHING")
        return env_id

    def add_point(
        self, run_id: str, point: dict[str, Any], samples: dict[str, list[float]] | None = None
    ) -> int:
        """Record one sweep point and its raw samples in one transaction; return point_id.

        `point` holds profile_points columns (missing ones are NULL; `status` defaults to
        'ok'); `samples` maps 'step' / 'fold' to the timed repeats in ms.
        """
        check_keys("point", point, POINT_FIELDS)
        row = {"status": "ok", **point}
        check_choice("point status", row["status"], POINT_STATUSES)
        for phase in samples or {}:
            check_choice("sample phase", phase, SAMPLE_PHASES)
        with self._transaction() as con:
            if not con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone():
                raise ValueError(f"no run {run_id!r} in {self.file}")
            (point_id,) = insert(con, "profile_points", {"run_id": run_id, **row},
                                  "RETURNING point_id").fetchone()
            for phase, values in (samples or {}).items():
                if values:
                    con.execute(
                        "INSERT INTO samples"
                        " SELECT $point_id, $phase, unnest(range(len($ms))), unnest($ms)",
                        {"point_id": point_id, "phase": phase, "ms": [float(v) for v in values]},
                    )
        return point_id

    def add_bench(self, run_id: str, name: str, value: float, unit: str,
                  params: dict[str, Any] | None = None) -> None:
        """Record one benchmark figure (e.g. 'decode.tokens_per_s', 412.0, 'tok/s')."""
        row = {"run_id": run_id, "name": name, "params": json.dumps(params or {}, sort_keys=True),
               "value": float(value), "unit": unit, "recorded_at": utcnow()}
        with self._transaction() as con:
            insert(con, "bench_results", row)

    def add_rows(self, table: str, run_id: str, rows: list[dict[str, Any]],
                 columns: Sequence[Column] = ()) -> None:
        """Append rows of `fsc train` (train_steps) or `fsc eval` (eval_cells) for run
        `run_id` in one transaction; missing columns are NULL. `columns` are the declared
        columns the rows may carry beyond the table's own (an eval task's), added to the table
        if it lacks them."""
        allowed = ROW_TABLES[table] + tuple(c.name for c in columns)
        for row in rows:
            check_keys(table, row, allowed)
        self._columns.clear()  # (a declared column may be added)
        with self._transaction() as con:
            if not con.execute("SELECT 1 FROM runs WHERE run_id = ?", [run_id]).fetchone():
                raise ValueError(f"no run {run_id!r} in {self.file}")
            add_columns(con, table, columns)
            now = utcnow()
            for row in rows:
                insert(con, table, {"run_id": run_id, **row, "recorded_at": now})

    # ---- checkpoints ---------------------------------------------------------------------

    def register_artifact(self, **fields: Any) -> str:
        """Record a checkpoint action (artifacts columns as keywords); return artifact_id."""
        check_keys("artifact", fields, ARTIFACT_FIELDS)
        check_choice("artifact action", fields.get("action"), ARTIFACT_ACTIONS)
        row = {"artifact_id": secrets.token_hex(8), "created_at": utcnow(), **fields}
        with self._transaction() as con:
            insert(con, "artifacts", row)
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
        if write:
            self._columns.clear()
        with self._open(write=write, sandbox=True) as con:
            try:
                return interruptible(
                    con, lambda: sandbox.execute(con, sql, write=write, max_rows=max_rows))
            except duckdb.Error as e:
                raise self._query_error(e) from e

    def columns(self, relation: str) -> tuple[str, ...]:
        """The columns of table or view `relation` (a name of SCHEMA) as this store has them
        (an eval task's declared column appears once rows carry it): read once for this Store,
        and again after it writes."""
        if relation not in self._columns:
            self._columns[relation] = tuple(self.query(f"SELECT * FROM {relation} LIMIT 0")[0])
        return self._columns[relation]

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
                    interruptible(con, lambda: exporting.write(con, sql, tmp, fmt))
                except duckdb.Error as e:
                    raise self._query_error(e) from e
            exporting.place(tmp, out, force)
        return out.stat().st_size

    def behind(self) -> str:
        """After a read: why a table, view or column of today's schema may be missing (an older
        store that fsc may not write, so could not upgrade), as a clause to end a message; ""
        otherwise."""
        if self._behind is None:
            return ""
        return (f" (the store's schema is version {self._behind} of {len(MIGRATIONS)}, not "
                "upgraded as fsc may not write the file; fsc query --write \"select 1\", run "
                "by a user who may write it, upgrades it)")

    def _query_error(self, e: duckdb.Error) -> StoreError:
        """A DuckDB error from a user's SQL: QueryError (exit 2), unless the store itself
        failed (I/O, internal errors): StoreError."""
        if "read-only" in str(e):
            return QueryError(READ_ONLY_MESSAGE)
        if isinstance(e, duckdb.PermissionException):
            return QueryError(f"{one_line(e)} (fsc query reaches only the store; to write a "
                              "result to a file, use --out FILE or `fsc export`)")
        if isinstance(e, (duckdb.IOException, duckdb.InternalException, duckdb.FatalException)):
            return StoreError(one_line(e))
        return QueryError(one_line(e) + self.behind())
