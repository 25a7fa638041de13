"""The documents of a local text file `--data` names: a .txt (the whole file), a .jsonl (one
JSON object a line, its `--text-field` string) or a .parquet (its `--text-field` column of
strings, read through DuckDB). What a file holds that is not text as asked (bytes that are not
UTF-8, a line that is not a JSON object, a row whose field is missing, null or not a string)
is one line naming the line or row, never read as something else or skipped; a leading UTF-8
byte-order mark is not text, and a .txt's line endings (CRLF, CR) read as LF.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from fsc.errors import UsageError

TEXT_SUFFIXES = (".txt", ".jsonl", ".parquet")
FIELD_SUFFIXES = (".jsonl", ".parquet")  # the files whose rows --text-field names a field of
BOM = b"\xef\xbb\xbf"
JSON_TYPES = {dict: "an object", list: "a list", int: "a number", float: "a number",
              bool: "a boolean", type(None): "null"}


def documents(path: Path, field: str) -> list[str]:
    """The documents of the .txt, .jsonl or .parquet file at `path` (`field`: of a row)."""
    if not path.is_file():
        raise UsageError(not_a_file(str(path)) or f"--data {path}: no such file")
    read = {".txt": _txt, ".jsonl": _jsonl, ".parquet": _parquet}[path.suffix]
    return read(path, field)


def not_a_file(spec: str) -> str | None:
    """Why `spec` is no text file `--data` reads when it is empty, names a directory or a file
    of another suffix; None otherwise."""
    if not spec.strip():  # (Path('') is the current directory)
        return "--data is empty; give a task, a corpus, a text file or hf:NAME"
    if Path(spec).is_dir():
        return (f"--data {spec}: a directory; give one {'/'.join(TEXT_SUFFIXES)} file in it "
                f"(hf:{spec} reads a folder of .jsonl or .parquet files through datasets)")
    if Path(spec).is_file() and (suffix := Path(spec).suffix) not in TEXT_SUFFIXES:
        which = f"{suffix} is none of them" if suffix else "it has none"
        return (f"--data {spec}: a file is read by its suffix, {', '.join(TEXT_SUFFIXES)} "
                f"({which}); name plain text .txt")
    return None


def _utf8(raw: bytes, where: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"--data {where}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _txt(path: Path, field: str) -> list[str]:
    text = _utf8(path.read_bytes().removeprefix(BOM), str(path))
    return [text.replace("\r\n", "\n").replace("\r", "\n")]


def _jsonl(path: Path, field: str) -> list[str]:
    docs = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, start=1):
            line = _utf8(raw.removeprefix(BOM) if n == 1 else raw, f"{path}:{n}")
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise UsageError(f"--data {path}:{n}: not a JSON line") from None
            docs.append(row_text(row, field, f"{path}:{n}"))
    return docs


def row_text(row, field: str, where: str) -> str:
    """The string `field` of `row` (a .jsonl line's JSON, a dataset's row); UsageError naming
    `where` (the file and line, or the row) for a row that is no object, lacks the field or
    holds something else there (null, a number)."""
    if not isinstance(row, dict):
        raise UsageError(f"--data {where}: {JSON_TYPES.get(type(row), 'a string')}, not a JSON "
                         "object")
    if field not in row:
        raise UsageError(f"--data {where}: no text field {field!r} (its fields: "
                         f"{', '.join(map(str, row)) or 'none'}; choose it with --text-field)")
    if not isinstance(row[field], str):
        raise UsageError(f"--data {where}: field {field!r} is "
                         f"{JSON_TYPES.get(type(row[field]), 'not text')}, not a string")
    return row[field]


def _parquet(path: Path, field: str) -> list[str]:
    try:
        db = duckdb.connect()
        columns = dict(db.execute("SELECT column_name, column_type FROM "
                                  "(DESCRIBE SELECT * FROM read_parquet(?))", [str(path)]).fetchall())
        if field not in columns:
            raise UsageError(f"--data {path}: no column {field!r} (columns: "
                             f"{', '.join(columns)}; choose one with --text-field)")
        if columns[field] != "VARCHAR":
            raise UsageError(f"--data {path}: column {field!r} is {columns[field]}, not text "
                             "(VARCHAR); choose a text column with --text-field")
        quoted = '"' + field.replace('"', '""') + '"'
        values = [v for (v,) in db.execute(f"SELECT {quoted} FROM read_parquet(?)",
                                           [str(path)]).fetchall()]
    except duckdb.Error as e:
        raise UsageError(f"--data {path}: not a readable parquet file "
                         f"({' '.join(str(e).split())[:160]})") from None
    nulls = [i for i, v in enumerate(values) if v is None]
    if nulls:
        raise UsageError(f"--data {path}: {len(nulls)} of {len(values)} rows have no "
                         f"{field!r} (null; the first is row {nulls[0] + 1})")
    return values
