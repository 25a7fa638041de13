"""What `fsc query` prints: a query's result for a person (a table that fits the terminal, or
one record per row when it does not) or for a program (csv, json)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from fsc.cli.common import printable
from fsc.jsonsafe import blob, clock, plain, stored

TABLE_MAX_ROWS = 1000
TABLE_DIGITS = 6  # significant digits of floats in tables; csv and json keep every digit
CELL_MAX_CHARS = 500  # a longer value ends in "…" on screen; csv, json and --out keep it whole
FOLD_AT = 40  # a wider text column may fold to this width before the table counts as too wide


def cell(value: Any, digits: int | None = None) -> str:
    """A value as text for a CSV cell (every digit) or a table cell (`digits` significant)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if digits is None else f"{value:.{digits}g}"
    if isinstance(value, (datetime, time)):
        return clock(value)
    if isinstance(value, timedelta):
        return _interval(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return blob(value)
    if isinstance(value, (list, dict)):  # csv: compact, as DuckDB's to_json writes it
        return json.dumps(_inner(value), default=str, ensure_ascii=False,
                          separators=(",", ":") if digits is None else None)
    return str(value)


def _inner(value: Any) -> Any:
    """A list's or a struct's values for its JSON text, times and intervals as in a cell."""
    if isinstance(value, (datetime, time, timedelta)):
        return cell(value)
    if isinstance(value, dict):
        return {str(k): _inner(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_inner(v) for v in value]
    return plain(value)


_DAY_US = 86_400_000_000


def _interval(value: timedelta) -> str:
    """An INTERVAL as DuckDB writes it (`1 day 04:00:00.5`, `-00:00:01`, `3 days`); DuckDB
    hands months over as 30 days each, and hours past a day as days."""
    total = value // timedelta(microseconds=1)
    days = int(total / _DAY_US)  # toward zero, as DuckDB splits an interval
    rest = total - days * _DAY_US
    parts = [f"{days} day{'' if abs(days) == 1 else 's'}"] if days else []
    if rest or not days:
        seconds, us = divmod(abs(rest), 1_000_000)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        fraction = f".{us:06d}".rstrip("0") if us else ""
        parts.append(f"{'-' if rest < 0 else ''}{hours:02d}:{minutes:02d}:{seconds:02d}{fraction}")
    return " ".join(parts)


def records(cols: list[str], rows: list[tuple]) -> list[dict[str, Any]]:
    """Rows as JSON objects, values as `--out FILE.json` writes them (fsc.jsonsafe.stored:
    times as DuckDB writes them, intervals in seconds); a column name given twice gets a
    suffix (a, a_1), as in --out."""
    from fsc.store.export import distinct_names

    keys = distinct_names(cols)
    return [dict(zip(keys, map(stored, row), strict=True)) for row in rows]


def _csv_field(value: Any) -> str:
    """One CSV field as DuckDB's writer (`--out FILE.csv`) writes it: NULL empty, an empty
    string quoted (""), so that the two stay apart; quoted where a comma, quote or line
    break needs it."""
    if value is None:
        return ""
    text = cell(value)
    if text == "" or any(c in text for c in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def print_csv(cols: list[str], rows: list[tuple]) -> None:
    """Rows as CSV on stdout, a header first (a name given twice: a, a_1, as in --out);
    every digit kept, booleans true and false, times and intervals as DuckDB writes them,
    lists, structs and maps as compact JSON: the bytes `--out FILE.csv` writes."""
    from fsc.store.export import distinct_names

    for row in (distinct_names(cols), *rows):
        sys.stdout.write(",".join(_csv_field(v) for v in row) + "\n")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _text(value: Any) -> Text:
    """A value as plain text: rich markup in it is shown, not obeyed; control characters
    (ANSI escapes, newlines) appear as escapes."""
    if value is None:
        return Text("NULL", style="dim")
    return Text(printable(cell(value, TABLE_DIGITS), CELL_MAX_CHARS))


def show(console: Console, cols: list[str], rows: list[tuple]) -> None:
    """Rows as a table when its columns fit the console's width (numbers right-aligned),
    otherwise one block per row of `column  value` lines; "0 rows" when there are none."""
    if not rows:
        console.print("0 rows")
        return
    heads = [Text(printable(c, 100)) for c in cols]
    body = [[_text(v) for v in row] for row in rows]
    widths = [max(h.cell_len, min(FOLD_AT, max(r[i].cell_len for r in body)))
              for i, h in enumerate(heads)]
    if sum(widths) + 3 * len(cols) + 1 <= console.width:  # "│ " + cell + " " per column, "│"
        table = Table()
        for i, head in enumerate(heads):
            values = [row[i] for row in rows if row[i] is not None]
            numeric = bool(values) and all(_is_number(v) for v in values)
            table.add_column(head, justify="right" if numeric else "left", overflow="fold")
        for texts in body:
            table.add_row(*texts)
        console.print(table)
        return
    pad = max(h.cell_len for h in heads) + 2
    for n, texts in enumerate(body, start=1):
        console.print(Rule(Text(f"row {n}"), align="left"))
        for head, text in zip(heads, texts, strict=True):
            name = head.plain + " " * (pad - head.cell_len)
            console.print(Text.assemble((name, "bold"), text))
