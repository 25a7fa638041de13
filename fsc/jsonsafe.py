"""Values made ready for JSON the one way fsc writes them (`--json`; a store's values, `stored`:
`fsc query --json`, `fsc export` to .json and .jsonl), and a JSON object read back from a file
that may not hold one (`json_object`)."""

from __future__ import annotations

import json
import math
from datetime import datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any


def plain(obj: Any) -> Any:
    """`obj` with non-finite floats as None (JSON has no NaN), mapping keys as text, tuples as
    lists and paths as text, a DECIMAL as the number it is where a JSON number holds it exactly
    (else as text, every digit kept); anything else as it is (json's `default=str` takes the
    rest)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Decimal) and obj.is_finite():
        as_float = float(obj)
        return as_float if Decimal(repr(as_float)) == obj else str(obj)
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def stored(obj: Any) -> Any:
    """A value read from the store as JSON holds it: a TIMESTAMP, TIMESTAMPTZ or TIME as text,
    as DuckDB writes it (`clock`: the form of `fsc query --csv` and the table), an INTERVAL as
    its seconds (a number: `1 day 04:00:00.5` is 100800.5; a month counts 30 days, as DuckDB's
    epoch() counts it), a BLOB as DuckDB writes it (`blob`), inside lists and structs too; the
    rest as `plain` makes it."""
    if isinstance(obj, (datetime, time)):
        return clock(obj)
    if isinstance(obj, timedelta):
        us = obj // timedelta(microseconds=1)
        return us // 10**6 if us % 10**6 == 0 else us / 10**6
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return blob(obj)
    if isinstance(obj, dict):
        return {str(k): stored(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [stored(v) for v in obj]
    return plain(obj)


def clock(value: datetime | time) -> str:
    """A TIMESTAMP, TIMESTAMPTZ or TIME as DuckDB writes it (ISO 8601 with a space between
    date and time): the fraction of a second without its trailing zeros, a zone as +HH
    (+HH:MM where it has minutes): `2026-12-07 07:39:33.5+00`."""
    naive = value.replace(tzinfo=None)
    text = naive.isoformat(sep=" ") if isinstance(value, datetime) else naive.isoformat()
    if "." in text:
        text = text.rstrip("0")
    offset = value.utcoffset()
    if offset is not None:
        h, m = divmod(abs(offset) // timedelta(minutes=1), 60)
        text += ("-" if offset < timedelta(0) else "+") + f"{h:02d}" + (f":{m:02d}" if m else "")
    return text


def blob(value: bytes | bytearray | memoryview) -> str:
    """A BLOB as DuckDB writes it: a printable ASCII byte as itself (but \\, " and '), any
    other as \\xNN."""
    return "".join(chr(b) if 32 <= b < 127 and b not in b"\\\"'" else f"\\x{b:02X}"
                   for b in bytes(value))


def json_object(path) -> dict:
    """The JSON object a file holds, as a dict; {} for a file that is missing or unreadable,
    not JSON, or JSON of another kind (None, a list): a config read where it may be."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
