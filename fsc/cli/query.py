"""`fsc query`, `fsc runs`, `fsc schema`: read the DuckDB store.

duckdb is imported inside the commands so that `fsc --help` stays fast.
"""

from __future__ import annotations

import csv
import json
import sys
from contextlib import redirect_stdout
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from fsc.cli.common import JsonOpt, StoreOpt, err, out, print_json, store_dir
from fsc.errors import UsageError

TABLE_MAX_ROWS = 1000
TABLE_DIGITS = 6  # significant digits of floats in tables; csv and json keep every digit
OUT_FORMATS = (".parquet", ".csv", ".json")


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def _cell(value: Any, digits: int | None = None) -> str:
    """A value as text for a CSV cell (every digit) or a table cell (`digits` significant)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value) if digits is None else f"{value:.{digits}g}"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return str(value)


def _records(cols: list[str], rows: list[tuple]) -> list[dict[str, Any]]:
    return [dict(zip(cols, row, strict=True)) for row in rows]


def _print_table(cols: list[str], rows: list[tuple], title: str | None = None) -> None:
    table = Table(title=title)
    for c in cols:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(
            *(Text("NULL", "dim") if v is None else Text(_cell(v, TABLE_DIGITS)) for v in row)
        )
    out.print(table)


def _print_csv(cols: list[str], rows: list[tuple]) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(cols)
    writer.writerows([_cell(v) for v in row] for row in rows)


def query(
    sql: Annotated[str, typer.Argument(help="SQL to run, e.g. \"select * from profile\".")],
    fmt: Annotated[
        Format, typer.Option("--format", help="Output on stdout: table, csv or json.")
    ] = Format.table,
    out_file: Annotated[
        Path | None,
        typer.Option("--out", help="Write the result to FILE (.parquet, .csv or .json) instead."),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write", help="Open the store read-write so SQL may modify it.")
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Run SQL against the store (read-only unless --write).

    Tables and views: see `fsc schema`; most questions start from the `profile` view.
    The table format shows the first 1000 rows; csv, json and --out give every row.
    """
    from fsc.store import Store

    st = Store(store_dir(store))
    if out_file is not None:
        suffix = out_file.suffix.lower()
        if suffix not in OUT_FORMATS:
            raise UsageError(
                f"--out {out_file}: unknown extension {suffix or '(none)'!r};"
                f" use one of {', '.join(OUT_FORMATS)}"
            )
        if suffix == ".json":
            cols, rows = st.query(sql, write=write)
            with out_file.open("w") as f, redirect_stdout(f):
                print_json(_records(cols, rows))
        else:
            st.export(sql, out_file, suffix[1:], write=write)
        err.print(f"wrote {out_file}")
        return
    max_rows = TABLE_MAX_ROWS + 1 if fmt is Format.table else None
    cols, rows = st.query(sql, write=write, max_rows=max_rows)
    if fmt is Format.json:
        print_json(_records(cols, rows))
    elif fmt is Format.csv:
        _print_csv(cols, rows)
    elif cols:
        _print_table(cols, rows[:TABLE_MAX_ROWS])
        if len(rows) > TABLE_MAX_ROWS:
            err.print(f"showing the first {TABLE_MAX_ROWS} rows; use --format csv/json or --out")


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, s = divmod(round(seconds), 60)
    h, m = divmod(minutes, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{seconds:.1f}s"


def runs(
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many recent runs.")] = 20,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Recent runs: status, whether a 'running' run's process is still alive, point counts.

    A run whose process was killed (SIGKILL, power loss) stays 'running' in the store; the
    process column then says 'dead'. 'unknown' means it ran on another host.
    """
    from fsc.store import Store

    found = Store(store_dir(store)).runs(limit)
    if as_json:
        print_json(found)
        return
    table = Table(title="runs (newest first; times UTC)")
    table.add_column("run_id", no_wrap=True)
    for c in ("kind", "status", "process", "started", "duration", "ok/oom/error", "command"):
        table.add_column(c, overflow="fold")
    for r in found:
        table.add_row(
            r["run_id"], r["kind"], r["status"], r["process"] or "-",
            r["started_at"].isoformat(sep=" ", timespec="seconds"), _duration(r["duration_s"]),
            f"{r['points_ok']}/{r['points_oom']}/{r['points_error']}", Text(r["command"] or ""),
        )
    out.print(table)


def schema(
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print Markdown (the schema part of docs/store.md).")
    ] = False,
) -> None:
    """Tables, views and columns of the store, with a one-line description each.

    Without a store yet, describes the schema a new store gets.
    """
    from fsc.store import Store
    from fsc.store.catalog import describe, to_markdown

    doc = describe(Store(store_dir(store)))
    if as_json:
        print_json(doc)
        return
    if markdown:
        print(to_markdown(doc), end="")
        return
    where = doc["store"] or "a new store"
    out.print(
        f"schema of {where}: version {doc['schema_version']} (fsc knows {doc['code_version']})"
    )
    for rel in doc["relations"]:
        table = Table(title=f"{rel['name']} ({rel['kind']}): {rel['description'] or ''}",
                      title_justify="left")
        for c in ("column", "type", "description"):
            table.add_column(c, overflow="fold")
        for c in rel["columns"]:
            table.add_row(c["name"], c["type"], c["description"] or "")
        out.print(table)


def register(app: typer.Typer) -> None:
    app.command("query")(query)
    app.command("runs")(runs)
    app.command("schema")(schema)
