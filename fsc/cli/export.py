"""`fsc export`: the result of a read-only query written to a Parquet, CSV, JSON or JSON Lines
file, and to no other place (see fsc/store/export.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from fsc.cli.bounds import one_value
from fsc.cli.common import (
    ForceOpt,
    JsonOpt,
    StoreOpt,
    err,
    fmt_bytes,
    print_json,
    printable,
    store_dir,
)

ONE_FILE = "one command writes one file"
OutOpt = Annotated[
    list[Path],
    typer.Option("--out", callback=one_value("--out", None, ONE_FILE), metavar="FILE",
                 help="File to write: .parquet, .csv, .json (one array) or .jsonl (one object "
                      "per line)."),
]


def whole(sql: str) -> str:
    """A bare table or view name (`fsc export profile`) as its rows: `SELECT * FROM` it. A
    word that is a statement by itself (show, describe, checkpoint, vacuum, begin) stays one."""
    import re

    from fsc.errors import QueryError
    from fsc.store import sandbox

    name = sql.strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return sql
    try:
        sandbox.parse(name)
    except QueryError:
        return f"SELECT * FROM {name}"
    return sql


def check(sql: str, out_file: Path | None, force: bool, write: bool = False,
          export: bool = False) -> None:
    """Before the store is opened: the SQL parses into statements the sandbox runs (said in
    `fsc export`'s words where `export`), and --out names a file that can be written."""
    from fsc.store import export as exporting
    from fsc.store import sandbox

    sandbox.check(sandbox.parse(sql), write, exporting=export)
    if out_file is not None:
        exporting.target(out_file, force, _what(out_file))


def _what(out_file: Path) -> str:
    return f"--out {out_file}"


def save(st, sql: str, out_file: Path, force: bool, as_json: bool = False) -> None:
    """Write the result of `sql` on Store `st` to `out_file` and say so on stderr (with
    `as_json`: as one JSON document on stdout)."""
    size = st.export(sql, out_file, force=force, what=_what(out_file))
    if as_json:
        print_json({"path": str(out_file), "bytes": size})
        return
    err.print(Text(f"wrote {printable(out_file)} ({fmt_bytes(size)})"), soft_wrap=True)


def export(
    sql: Annotated[str, typer.Argument(metavar="SQL", help="One read-only query, e.g. \"select * from profile\", "
                                            "or a table or view's name (profile): its rows.")],
    out_file: OutOpt,
    force: ForceOpt = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the result of a read-only query to --out FILE (.parquet, .csv, .json or .jsonl).

    The query runs in the same sandbox as `fsc query`; only FILE is written (an existing one
    only with --force). JSON files encode values as `--json` does: non-finite numbers are null.
    --json prints the file written and its size.
    """
    from fsc.store import Store

    (out_file,) = out_file  # one value (see OutOpt)
    sql = whole(sql)
    check(sql, out_file, force, export=True)
    st = Store(store_dir(store))
    st.check(write=False)
    save(st, sql, out_file, force, as_json)
