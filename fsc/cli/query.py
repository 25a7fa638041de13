"""`fsc query`, `fsc schema`: read the DuckDB store; registers `fsc export` and `fsc runs` too.

duckdb is imported inside the commands so that `fsc --help` stays fast.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from fsc.cli import export as export_cmd
from fsc.cli import runs as runs_cmd
from fsc.cli.bounds import one_value
from fsc.cli.common import JsonOpt, StoreOpt, err, out, print_json, printable, store_dir
from fsc.cli.confirm import confirm
from fsc.cli.query_render import TABLE_MAX_ROWS, print_csv, records, show
from fsc.errors import UsageError


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def query(
    sql: Annotated[str, typer.Argument(metavar="SQL", help="SQL to run, e.g. \"select * from profile\", or a "
                                            "table or view's name (profile): its rows.")],
    fmt: Annotated[
        Format | None,
        typer.Option("--format", help="Output on stdout: table (default), csv or json."),
    ] = None,
    as_json: JsonOpt = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Same as --format csv.")] = False,
    out_file: Annotated[
        list[Path] | None,
        typer.Option("--out", callback=one_value("--out", None, export_cmd.ONE_FILE),
                     metavar="FILE", show_default=False,
                     help="Write the result to FILE (.parquet, .csv, .json or .jsonl) instead, "
                          "as `fsc export` does (--json: print its path and size)."),
    ] = None,
    force: export_cmd.ForceOpt = False,
    write: Annotated[
        bool, typer.Option("--write", help="Open the store read-write so SQL may modify it.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", help="With --write, run DELETE, DROP, TRUNCATE, ALTER or "
                                         "MERGE without asking.")
    ] = False,
    store: StoreOpt = None,
) -> None:
    """Run SQL against the store (read-only unless --write).

    Tables and views: see `fsc schema`; most questions start from the `profile` view.
    Read-only, one statement runs; it reaches nothing outside the store (no COPY, read_csv,
    ATTACH, INSTALL, ...): write results to a file with --out or `fsc export`. With --write,
    all statements run in one transaction and the last one's result is shown.
    The table shows the first 1000 rows, one block per row when the columns do not fit the
    terminal; csv, json and --out give every row.
    """
    (out_file,) = out_file  # one value or None (see one_value)
    sql = export_cmd.whole(sql)
    if as_json and as_csv:
        raise UsageError("--json and --csv disagree; give one of them")
    if out_file is not None and (as_csv or fmt is not None):
        given = "--csv" if as_csv else f"--format {fmt.value}"
        raise UsageError(f"--out writes the format its extension names ({out_file.suffix or 'none'}"
                         f"); drop {given}")
    for flag, given, want in (("--json", as_json, Format.json), ("--csv", as_csv, Format.csv)):
        if given and fmt not in (None, want):
            raise UsageError(f"{flag} and --format {fmt.value} disagree; give one of them")
        fmt = want if given else fmt
    fmt = fmt or Format.table
    if out_file is not None and write:
        raise UsageError("--out writes the result of a read-only query; drop --write")
    if force and out_file is None:
        raise UsageError("--force replaces the file --out names; give --out FILE or drop --force")
    if yes and not write:
        raise UsageError("--yes confirms what --write runs; give --write or drop --yes")
    from fsc.store import Store
    from fsc.store.sandbox import destructive

    export_cmd.check(sql, out_file, force, write)
    st = Store(store_dir(store))
    st.check(write=write)
    if out_file is not None:
        export_cmd.save(st, sql, out_file, force, as_json)
        return
    if write:
        kinds = destructive(sql)
        if kinds:
            confirm(f"the SQL runs {', '.join(dict.fromkeys(kinds))} on the store", yes)
    max_rows = TABLE_MAX_ROWS + 1 if fmt is Format.table else None
    cols, rows = st.query(sql, write=write, max_rows=max_rows)
    if fmt is Format.json:
        print_json(records(cols, rows))
    elif fmt is Format.csv:
        print_csv(cols, rows)
    elif cols:
        show(out, cols, rows[:TABLE_MAX_ROWS])
        if len(rows) > TABLE_MAX_ROWS:
            err.print(f"showing the first {TABLE_MAX_ROWS} rows; use --format csv/json or --out")


def declared() -> dict:
    """The row tables' declared columns (fsc.store.schema.Column): the eval tasks' own and the
    harness's, which a store gains as they first write; `fsc schema` describes them."""
    from fsc.eval.columns import ALL
    from fsc.harness import COLUMNS

    return {"eval_cells": (*ALL, *COLUMNS)}


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
    if as_json and markdown:
        raise UsageError("--json and --markdown disagree; give one of them")
    from fsc.store import Store
    from fsc.store.catalog import describe, to_markdown

    st = Store(store_dir(store))
    st.check()
    doc = describe(st, declared())
    if as_json:
        print_json(doc)
        return
    if markdown:
        print(to_markdown(doc), end="")
        return
    where = doc["store"] or "a new store"
    out.print(
        f"schema of {where}: version {doc['schema_version']} (fsc knows {doc['code_version']})",
        markup=False, highlight=False,
    )
    for rel in doc["relations"]:
        # names come from the store's catalog, where --write may have put any text
        title = f"{rel['name']} ({rel['kind']}): {rel['description'] or ''}"
        table = Table(title=Text(printable(title)), title_justify="left")
        for c in ("column", "type", "description"):
            table.add_column(c, overflow="fold")
        for c in rel["columns"]:
            table.add_row(*(Text(printable(c[k] or "")) for k in ("name", "type", "description")))
        out.print(table)


def register(app: typer.Typer) -> None:
    app.command("query")(query)
    app.command("export")(export_cmd.export)
    app.add_typer(runs_cmd.app, name="runs")
    app.command("schema")(schema)
