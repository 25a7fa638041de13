"""Tables that read at the terminal's width: `fitted` is how every result table of fsc is laid
out (profile, compare, runs).

At a given width, in this order:
- a column named in `hoist` whose cells are all the same leaves the table and is said once in
  the title ("G 4 · K 4 · dtype bf16");
- the columns in `drop` go, in that order, until the rest fits: every figure stays in the store
  and in --json;
- a column in `text` (a command, an error) takes the room left and is cut with "…".
No cell of any other column is ever cut or wrapped, and no header word is split; only the recipe
column (and those named in `fold`, a path) may fold onto more lines. `width=None` (--wide) keeps every column and all text.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

WideOpt = Annotated[bool, typer.Option(
    "--wide", help="Every column and all text, however wide the terminal (default: fit it).")]

MIN_TEXT = 20  # a text column narrower than this is worth less than the next column dropped
WIDE = 10**4
SUMMARY = "\0summary"  # a record with this key set is a summary row, below a line of its own


def _plain(cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _hoisted(columns: list[str], records: list[dict], hoist: tuple[str, ...]) -> list[str]:
    rows = [r for r in records if not r.get(SUMMARY)]
    return [c for c in columns if c in hoist and rows
            and len({_plain(r.get(c, "")) for r in rows}) == 1]


def _table(title: str | None, shown: list[str], records: list[dict], text: tuple[str, ...],
           room: int | None, left: tuple[str, ...], fold: tuple[str, ...] = ()) -> Table:
    table = Table(title=title)
    for col in shown:
        if col in text:
            table.add_column(col, justify="left", no_wrap=True, overflow="ellipsis",
                             max_width=room)
        elif col == "recipe" or col in fold:
            table.add_column(col, justify="left", overflow="fold",
                             min_width=max(len(w) for w in col.split()))
        else:
            table.add_column(col, justify="left" if col in left else "right", no_wrap=True)
    for rec in records:
        if rec.get(SUMMARY):
            table.add_section()
        table.add_row(*(rec.get(col, "") for col in shown))
    return table


def _natural(table: Table, console: Console) -> int:
    return console.measure(table, options=console.options.update_width(WIDE)).maximum


def fitted(title: str | None, columns: tuple[str, ...], records: list[dict], console: Console,
           drop: tuple[str, ...] = (), *, hoist: tuple[str, ...] = (),
           text: tuple[str, ...] = (), left: tuple[str, ...] = (),
           width: int | None = -1, fold: tuple[str, ...] = ()) -> Table:
    """A table of `records` (column -> cell) laid out for `width` columns (default: the
    console's; None: no limit, as --wide), see the module docstring. Cells are right-aligned
    but in `left`, `text` and the recipe column. Columns in `fold` fold onto more lines, as the
    recipe column does, rather than be cut (a path)."""
    limit = console.width if width == -1 else width
    shown = list(columns)
    gone = _hoisted(shown, records, hoist)
    if gone:
        first = next(r for r in records if not r.get(SUMMARY))
        said = " · ".join(f"{c} {_plain(first[c])}" for c in gone)
        title = f"{title} · {said}" if title else said
        shown = [c for c in shown if c not in gone]
    if limit is None:
        return _table(title, shown, records, text, None, left, fold)
    for dropped in (None, *drop):
        if dropped is not None and dropped in shown:
            shown.remove(dropped)
        texts = [c for c in shown if c in text]
        fixed = _table(title, [c for c in shown if c not in text], records, text, None, left, fold)
        used = _natural(fixed, console) + 3 * len(texts)  # "│ " + cell + " " per text column
        room = (limit - used) // len(texts) if texts else 0
        if used <= limit and (not texts or room >= MIN_TEXT):
            break
    return _table(title, shown, records, text, max(room, 4) if texts else None, left, fold)


def show(console: Console, table: Table, wide: bool = False) -> None:
    """Print `table`; with `wide` at its natural width even past the console's (the terminal
    wraps the lines; a pager or a file keeps them whole)."""
    if not wide:
        console.print(table)
        return
    width = console.width  # print caps a width at the console's: widen the console a moment
    console.width = max(width, _natural(table, console))
    try:
        console.print(table, crop=False)
    finally:
        console.width = width
