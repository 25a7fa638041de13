"""What `fsc query` runs of a user's SQL, and how.

Two guards, each enough on its own for what it covers. The connection is DuckDB's sandbox
(connect.SANDBOX: no file outside the store, no extension, locked settings), so SQL cannot
reach the machine whatever it says. And each statement is parsed by DuckDB and judged by its
kind before anything runs: read-only mode runs one reading statement; COPY, EXPORT, ATTACH,
INSTALL/LOAD and SET are never run, with a message that says what to do instead.

With --write, all statements run in one transaction, which commits only if the store is still
whole afterwards: fsc's own tables and views keep their columns, no point, benchmark figure,
training step or eval cell is left without its run, and samples of removed points go with them
(DuckDB's foreign keys cannot express this: a run and its points could not be deleted in one
transaction).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import duckdb

from fsc.errors import QueryError
from fsc.store.connect import one_line
from fsc.store.schema import RUN_KINDS, SCHEMA
from fsc.text import counted

READ_ONLY_MESSAGE = "query is read-only; modify the store with fsc query --write"

# Statement kinds (DuckDB's StatementType names) a read-only query may run. SHOW, DESCRIBE,
# SUMMARIZE, VALUES and FROM-first queries parse as SELECT; PIVOT parses as MULTI.
READ_KINDS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "MULTI"})
# CALL may write (CHECKPOINT parses as one): it runs with --write; a table function is read
# with SELECT.
_CALL_HINT = ("(it may modify the store, as CHECKPOINT does); to read a table function, "
              "select from it: SELECT * FROM f(...)")
# Kinds that remove data or change a table: --write asks for --yes before these (TRUNCATE
# parses as DELETE; MERGE may delete).
DESTRUCTIVE_KINDS = frozenset({"DELETE", "DROP", "ALTER", "MERGE_INTO"})
_OUTSIDE = {
    "COPY": "COPY",
    "EXPORT": "EXPORT DATABASE",
    "COPY_DATABASE": "COPY FROM DATABASE",
    "ATTACH": "ATTACH",
    "DETACH": "DETACH",
    "LOAD": "INSTALL and LOAD",
    "EXTENSION": "extension statements",
}
_PLURAL = {"INSTALL and LOAD", "extension statements"}  # (said "are not run")
_NEVER = {
    "SET": "SET, RESET and USE are not run: fsc query's settings are fixed",
    "TRANSACTION": "BEGIN, COMMIT and ROLLBACK are not needed: with --write, fsc query runs "
                   "all its statements in one transaction",
}


@dataclass(frozen=True)
class Statement:
    kind: str  # DuckDB's StatementType name, or "UNKNOWN" for one this duckdb cannot name
    text: str


def _group(found: list) -> list[Statement]:
    """DuckDB's statements as the user wrote them. DuckDB before 2.0 expands a PIVOT into
    CREATE TYPE statements and a SELECT, all with empty text: those become one MULTI, as
    DuckDB 2 reports it."""
    out, expanded = [], []
    for s in found:
        if s.query:
            out.append(Statement(_kind(s), s.query))
            continue
        expanded.append(s)
        if _kind(s) != "CREATE":  # the SELECT that ends the expansion
            out.append(Statement("MULTI", ""))
            expanded = []
    out.extend(Statement(_kind(s), "") for s in expanded)
    return out


def parse(sql: str, con: duckdb.DuckDBPyConnection | None = None) -> list[Statement]:
    """The statements of `sql`, parsed by DuckDB (on `con`, or an in-memory database).
    QueryError when there is none or the SQL does not parse."""
    if sql.strip():
        try:
            if con is None:
                with duckdb.connect(":memory:") as mem:
                    found = mem.extract_statements(sql)
            else:
                found = con.extract_statements(sql)
        except duckdb.Error as e:
            raise QueryError(one_line(e)) from e
        except IndexError as e:  # duckdb 1.x's binding, on a PIVOT after another statement
            raise QueryError(f"DuckDB could not split the SQL into statements ({e}); "
                             "run them one at a time") from e
    else:
        found = []
    if not found:
        raise QueryError('no SQL statement given (only blanks, ";" or comments); '
                         'e.g. fsc query "select * from profile limit 5"')
    return _group(found)


def _kind(statement) -> str:
    try:
        return statement.type.name
    except ValueError:  # a kind newer than the Python binding's enum (e.g. UPDATE EXTENSIONS)
        return "UNKNOWN"


def check(statements: list[Statement], write: bool, exporting: bool = False) -> None:
    """Refuse what `fsc query` never runs, and, without `write`, anything but one reading
    statement. Raises QueryError naming the statement and what to do instead (`exporting`:
    in `fsc export`'s words, which writes one query's result and never the store)."""
    for st in statements:
        if st.kind in _OUTSIDE:
            said = f"{_OUTSIDE[st.kind]} {'are' if _OUTSIDE[st.kind] in _PLURAL else 'is'} not run"
            raise QueryError(
                f"{said}: fsc export writes the one file --out names" if exporting else
                f"{said}: fsc query reaches only the store (to write a result to a file, use "
                "--out FILE or `fsc export`)"
            )
        if st.kind in _NEVER:
            raise QueryError(_NEVER[st.kind])
        if st.kind == "UNKNOWN":
            raise QueryError(f"fsc query does not run this kind of statement: {_short(st.text)}")
    if write:
        return
    if len(statements) > 1:
        raise QueryError(
            f"{len(statements)} statements given; fsc export writes the result of one"
            if exporting else
            f"{len(statements)} statements given; a read-only query runs one (with --write, "
            "all run in one transaction and the last one's result is shown)"
        )
    if statements[0].kind == "CALL" and statements[0].text.lstrip()[:4].lower() == "call":
        raise QueryError(("fsc export does not run CALL " if exporting else
                          "CALL runs only with --write ") + _CALL_HINT)
    if statements[0].kind not in READ_KINDS:
        raise QueryError("fsc export writes the result of a read-only query; modify the store "
                         "with fsc query --write" if exporting else READ_ONLY_MESSAGE)


def destructive(sql: str) -> list[str]:
    """The kinds of the statements in `sql` that remove data or change a table, in order."""
    return [st.kind for st in parse(sql) if st.kind in DESTRUCTIVE_KINDS]


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def execute(
    con: duckdb.DuckDBPyConnection, sql: str, *, write: bool, max_rows: int | None = None
) -> tuple[list[str], list[tuple]]:
    """Check and run `sql` on `con` (a sandboxed connection, read-only unless `write`); return
    (column names, rows) of the last statement, at most `max_rows` rows."""
    statements = parse(sql, con)
    check(statements, write)
    if not write:
        return _fetch(con.execute(sql), max_rows)
    con.execute("BEGIN TRANSACTION")
    try:
        before = _orphans(con)
        con.execute(f"CREATE TEMP TABLE {_POINTS_BEFORE} AS SELECT point_id FROM profile_points")
        # DuckDB runs every statement of the text, in this transaction, and returns the last
        # one's result (running parsed statements one by one fails on expanded ones in 1.x)
        result = _fetch(con.execute(sql), max_rows)
        _settle(con, before)
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a failed statement may have ended it already
            con.execute("ROLLBACK")
        raise
    return result


def _fetch(cur: duckdb.DuckDBPyConnection, max_rows: int | None) -> tuple[list[str], list]:
    if cur.description is None:
        return [], []
    cols = [d[0] for d in cur.description]
    return cols, cur.fetchall() if max_rows is None else cur.fetchmany(max_rows)


# the tables whose rows belong to a run, and what a message calls those rows
_RUN_ROWS = {"profile_points": "points", "bench_results": "benchmark figures",
             "train_steps": "training steps", "eval_cells": "eval cells"}


# the points there were before --write statements ran (a temporary table of their transaction):
# a sample of a point removed goes with it, one of no point at all is refused
_POINTS_BEFORE = "fsc_points_before_write"

# the rows that name a recipe by its hash, which the `recipes` table holds
_RECIPE_ROWS = (*_RUN_ROWS.keys() - {"bench_results"}, "artifacts")


def _orphans(con: duckdb.DuckDBPyConnection) -> tuple[int, int, int, int]:
    """(points, benchmark figures, training steps and eval cells whose run is not in `runs`;
    runs whose environment is not in `environments`, or none; rows whose recipe is not in
    `recipes`, or none; runs of a kind fsc does not know): what a report's provenance, and the
    views, would lose. (Compared before and after: a run recorded without an environment, or
    a row without a recipe, by fsc itself is no loss.)"""
    no_run = " + ".join(f"(SELECT count(*) FROM {table} x WHERE NOT EXISTS"
                        " (SELECT 1 FROM runs r WHERE r.run_id = x.run_id))"
                        for table in _RUN_ROWS)
    no_env = ("(SELECT count(*) FROM runs r WHERE r.env_id IS NULL OR NOT EXISTS"
              " (SELECT 1 FROM environments e WHERE e.env_id = r.env_id))")
    no_recipe = " + ".join(f"(SELECT count(*) FROM {table} x WHERE x.recipe_hash IS NULL"
                           " OR NOT EXISTS (SELECT 1 FROM recipes c"
                           " WHERE c.recipe_hash = x.recipe_hash))"
                           for table in sorted(_RECIPE_ROWS))
    kinds = ", ".join(f"'{k}'" for k in RUN_KINDS)
    no_kind = f"(SELECT count(*) FROM runs WHERE kind IS NULL OR kind NOT IN ({kinds}))"
    return con.execute(f"SELECT {no_run}, {no_env}, {no_recipe}, {no_kind}").fetchone()


def _settle(con: duckdb.DuckDBPyConnection, orphans_before: tuple[int, int, int]) -> None:
    """After --write statements, inside their transaction: refuse (QueryError, so the caller
    rolls back) if fsc's tables or views lost one or a column, if points, benchmark figures,
    training steps or eval cells lost their run, or runs their environment, or rows their
    recipe; then remove the samples of removed points."""
    have: dict[str, set[str]] = {}
    for table, column in con.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'main' AND table_catalog = current_database()"
    ).fetchall():
        have.setdefault(table, set()).add(column)
    for name, rel in SCHEMA.items():
        missing = [c for c in rel.columns if c not in have.get(name, ())]
        if name not in have or missing:
            what = (f"{rel.kind} {name}" if name not in have else
                    f"column{'s' if len(missing) > 1 else ''} {', '.join(missing)} of "
                    f"{rel.kind} {name}")
            raise QueryError(f"nothing changed: the statements would remove {what}, which fsc "
                             "needs; to remove a run, use `fsc runs rm RUN_ID`")
    orphans, no_env, no_recipe, no_kind = (n - was for n, was in zip(
        _orphans(con), orphans_before, strict=True))
    if orphans > 0:
        raise QueryError(
            f"nothing changed: the statements would leave {counted(orphans, 'row')} "
            f"({', '.join(_RUN_ROWS.values())}) without their run; to remove a run with "
            "everything it stored, use `fsc runs rm RUN_ID`"
        )
    lost = [f"{counted(n, what)} without {'its' if n == 1 else 'their'} {whose}"
            for n, what, whose in ((no_env, "run", "environment"), (no_recipe, "row", "recipe"),
                                   (no_kind, "run", f"kind ({', '.join(RUN_KINDS)})"))
            if n > 0]
    if lost:
        raise QueryError(f"nothing changed: the statements would leave {' and '.join(lost)}, "
                         "which the views and every report's provenance read; to remove a run "
                         "with everything it stored, use `fsc runs rm RUN_ID`")
    strays = con.execute(  # samples the statements added of no point, before or after
        "SELECT count(*) FROM samples s WHERE NOT EXISTS (SELECT 1 FROM profile_points p"
        f" WHERE p.point_id = s.point_id) AND s.point_id NOT IN (SELECT point_id FROM"
        f" {_POINTS_BEFORE})").fetchone()[0]
    if strays:
        raise QueryError(f"nothing changed: the statements would add {counted(strays, 'sample')} "
                         "of no point (samples.point_id names a row of profile_points)")
    con.execute(f"DROP TABLE {_POINTS_BEFORE}")
    con.execute("DELETE FROM samples s"
                " WHERE NOT EXISTS (SELECT 1 FROM profile_points p WHERE p.point_id = s.point_id)")
