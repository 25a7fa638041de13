"""A query's result written to the one file a user names (`fsc export`, `fsc query --out`).

The query runs on a sandboxed read-only connection (sandbox.py) that may write into one
folder only: a private temporary folder fsc creates beside the target. DuckDB writes Parquet
and CSV there with its own writers; JSON and JSON Lines are written by fsc from the fetched
rows, with the encoding of `fsc query --json` (fsc.jsonsafe.stored: non-finite numbers become
null, where DuckDB would write NaN, which is not JSON; times as DuckDB writes them, intervals
in seconds). The finished file is then moved to the named path: linked, so that an
existing file is never replaced unless `force`.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from fsc.errors import QueryError, UsageError
from fsc.jsonsafe import stored
from fsc.paths import output_file
from fsc.store import sandbox

FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "jsonl"}
_BATCH_ROWS = 10_000


def target(out: Path, force: bool, what: str | None = None) -> str:
    """Check the file to write before any work (`what` names it in errors); return its
    format. UsageError for an unknown extension, a folder that is missing or takes no new
    files, a directory, or an existing file without `force`."""
    what = what or f"cannot write {out}"
    fmt = FORMATS.get(out.suffix.lower())
    if fmt is None and out.is_dir():
        raise UsageError(f"{what}: is a directory; name the file to write in it, e.g. "
                         f"{out / 'result.parquet'}")
    if fmt is None:
        piped = (" (for standard output: fsc query SQL --csv, or --format json)"
                 if str(out) in ("-", "/dev/stdout") else "")
        raise UsageError(f"{what}: unknown extension {out.suffix or '(none)'!r}; use one of "
                         f"{', '.join(FORMATS)}{piped}")
    output_file(out, what, force=force)
    return fmt


@contextmanager
def private_folder(out: Path) -> Iterator[Path]:
    """A new empty folder beside `out`, removed with whatever is left in it."""
    folder = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield folder.resolve()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write(con: duckdb.DuckDBPyConnection, sql: str, path: Path, fmt: str) -> None:
    """Run one read-only statement of `sql` on `con` and write its rows to `path` as `fmt`."""
    statements = sandbox.parse(sql, con)
    sandbox.check(statements, write=False, exporting=True)
    if fmt in ("json", "jsonl"):
        cur = con.execute(sql)  # the one statement, as written
        if cur.description is None:
            raise QueryError("the statement returns no rows to write")
        _write_json(cur, path, lines=fmt == "jsonl")
        return
    rel = con.sql(sql)
    if rel is None:
        raise QueryError("the statement returns no rows to write")
    if fmt == "parquet":
        rel.write_parquet(str(path))
    else:
        _nested_as_json(rel).write_csv(str(path), header=True)


_NESTED = ("list", "array", "struct", "map", "union")


def _nested_as_json(rel: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """`rel` with its lists, structs and maps as JSON text, as `fsc query --csv` writes them
    (DuckDB's CSV writer would write ['a', 'b'] and {'k': v}, which no JSON reader takes);
    a name given twice becomes a, a_1, as DuckDB's writer names it."""
    if not any(t.id in _NESTED for t in rel.types):
        return rel
    names = distinct_names(rel.columns)
    return rel.project(", ".join(
        (f"to_json(#{i})" if t.id in _NESTED else f"#{i}") + ' AS "' + n.replace('"', '""') + '"'
        for i, (t, n) in enumerate(zip(rel.types, names, strict=True), start=1)))


def distinct_names(cols: list[str]) -> list[str]:
    """Column names as JSON object keys: a name given twice (`select 1 as a, 2 as a`) gets
    `_1`, `_2`, ... after it, as DuckDB names such columns in Parquet and CSV, so that no
    value is lost to a key written twice."""
    seen: set[str] = set()
    names = []
    for name in cols:
        unique, n = name, 0
        while unique in seen:
            n += 1
            unique = f"{name}_{n}"
        seen.add(unique)
        names.append(unique)
    return names


def _write_json(cur: duckdb.DuckDBPyConnection, path: Path, lines: bool) -> None:
    """The rows of `cur`'s result as one JSON object each: a JSON array, or one object per
    line (JSON Lines); fetched in batches, so a large result never sits in memory whole."""
    cols = distinct_names([d[0] for d in cur.description])
    with path.open("w", encoding="utf-8") as f:
        if not lines:
            f.write("[")
        n = 0
        while batch := cur.fetchmany(_BATCH_ROWS):
            for row in batch:
                text = json.dumps({c: stored(v) for c, v in zip(cols, row, strict=True)},
                                  default=str, allow_nan=False)
                f.write(text + "\n" if lines else ("," if n else "") + "\n" + text)
                n += 1
        if not lines:
            f.write("\n]\n")


def place(tmp: Path, out: Path, force: bool) -> None:
    """Move the finished `tmp` to `out`. Without `force` a hard link, which fails rather than
    replace a file that appeared meanwhile."""
    if force:
        os.replace(tmp, out)
        return
    try:
        os.link(tmp, out)
    except FileExistsError:
        raise UsageError(f"{out} exists; pass --force to replace it") from None
