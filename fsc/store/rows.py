"""What every write does to a row before it stores it: each value made what its column holds
(naive UTC timestamps, JSON text), the caller's keys and choices checked, and the INSERT."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import duckdb

from fsc.store.schema import SCHEMA

# The columns a caller may give: of a point, an environment, an artifact.
POINT_FIELDS = tuple(c for c in SCHEMA["profile_points"].columns if c not in ("point_id", "run_id"))
ENV_FIELDS = tuple(c for c in SCHEMA["environments"].columns if c not in ("env_id", "first_seen"))
ARTIFACT_FIELDS = tuple(SCHEMA["artifacts"].columns)
# Tables `add_rows` appends to, with the columns a caller may give.
ROW_TABLES = {t: tuple(c for c in SCHEMA[t].columns if c not in ("run_id", "recorded_at"))
              for t in ("train_steps", "eval_cells")}

_TIMESTAMPS = {"started_at", "resumed_at", "ended_at", "created_at"}
_JSON_TEXT = {"mixer_backends", "files_sha256", "config"}


def as_stored(column: str, value: Any) -> Any:
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


def check_keys(what: str, given: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {what} field(s) {unknown}; allowed: {', '.join(allowed)}")


def check_choice(what: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{what} {value!r} is not one of {', '.join(allowed)}")


def insert(con: duckdb.DuckDBPyConnection, table: str, row: dict[str, Any], tail: str = "") -> Any:
    cols = ", ".join(f'"{c}"' for c in row)
    marks = ", ".join("?" for _ in row)
    values = [as_stored(c, v) for c, v in row.items()]
    return con.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks}) {tail}", values)
