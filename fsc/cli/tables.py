"""Tables that read at the terminal's width: `fitted` is how every result table of fsc is laid
out (profile, compare, runs, eval: fsc.cli.eval_tables, which splits a heatmap by columns).

At a given width, in this order:
- a column named in `hoist` whose cells are all the same leaves the table and is said once in
  the title ("G 4 · K 4 · dtype bf16"), which a narrow table breaks between such pieces only;
- the columns in `drop` go, in that order, until the rest fits: every figure stays in the store
  and in --json;
- a column in `text` (a command, an error) takes the room left and is cut with "…"; where
  fewer than LEAST_TEXT columns are left for it, it goes too (where `drop` names it, or at
  the end).
No cell of any other column is ever cut or wrapped, and no header word is split. The recipe
column (and those named in `fold`, a path) may take more lines: the recipe at its spaces
("geometric / mean") until `drop` is spent, then, like a path, anywhere. A table whose other
columns still do not fit is printed whole by `show`, wider than the terminal, which wraps its
lines: a run id a user copies is never cut. `width=None` (--wide) keeps every column and all
text.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

WideOpt = Annotated[bool, typer.Option(
    "--wide", help="Every column and all text, however wide the terminal (default: fit it).")]

MIN_TEXT = 20  # a text column narrower than this is worth less than the next column dropped
LEAST_TEXT = 10  # and narrower than this, `drop` spent (or naming it), it goes too
WIDE = 10**4
SUMMARY = "\0summary"  # a record with this key set is a summary row, below a line of its own
GLUE = "\xa0"  # a no-break space: joins the name and the value of a piece of a title ("G 4")
_HELD = "\ue000"  # stands for GLUE while a title wraps: one cell wide, and not whitespace


def _plain(cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _hoisted(columns: list[str], records: list[dict], hoist: tuple[str, ...]) -> list[str]:
    rows = [r for r in records if not r.get(SUMMARY)]
    return [c for c in columns if c in hoist and rows
            and len({_plain(r.get(c, "")) for r in rows}) == 1]


class Title(Text):
    """A table's title that a narrow table breaks only at its plain spaces, never at a GLUE.
    rich breaks a line at any whitespace, a no-break space too (Python's \\s matches it): the
    title wraps with GLUE held by a character that is not whitespace, and each line shows it
    as a plain space (what a reader copies or searches for)."""

    def wrap(self, console, width, **how):
        held = self.copy()
        held.plain = self.plain.replace(GLUE, _HELD)
        lines = held.wrap(console, width, **how)
        for line in lines:
            line.plain = line.plain.replace(_HELD, " ")
        return lines


class Fitted(Table):
    """A table `fitted` laid out; `least`: the width it needs with no cell cut."""

    least = 0


def _table(title: str | None, shown: list[str], records: list[dict], text: tuple[str, ...],
           room: int | None, left: tuple[str, ...], fold: tuple[str, ...] = ()) -> Fitted:
    table = Fitted(title=title and Title(title, style="table.title"))
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


def _width(col: str, records: list[dict], words: bool) -> int:
    """The widest cell of `col`, its header's included (`words`: the longest word)."""
    cells = [col, *(_plain(r.get(col, "")) for r in records)]
    return max(cell_len(w) for c in cells for w in ((c.split() or [""]) if words else [c]))


def _needs(shown: list[str], records: list[dict], text: tuple[str, ...],
           fold: tuple[str, ...], folded: tuple[str, ...] = ()) -> int:
    """Columns of the terminal the `shown` columns take, a text column at none, the recipe
    column at its longest word, every other cell whole; those in `folded` at their header's
    longest word, as they may fold anywhere."""
    widths = [0 if c in text else max(len(w) for w in c.split()) if c in folded
              else _width(c, records, words=c == "recipe") for c in shown]
    return sum(widths) + 3 * len(shown) + 1  # "│ " + cell + " " per column, "│"


def _natural(table: Table, console: Console) -> int:
    return console.measure(table, options=console.options.update_width(WIDE)).maximum


def fitted(title: str | None, columns: tuple[str, ...], records: list[dict], console: Console,
           drop: tuple[str, ...] = (), *, hoist: tuple[str, ...] = (),
           text: tuple[str, ...] = (), left: tuple[str, ...] = (),
           width: int | None = -1, fold: tuple[str, ...] = ()) -> Fitted:
    """A table of `records` (column -> cell) laid out for `width` columns (default: the
    console's; None: no limit, as --wide), see the module docstring. Cells are right-aligned
    but in `left`, `text` and the recipe column. Columns in `fold` fold onto more lines, as the
    recipe column does, rather than be cut (a path). Print it with `show`, which keeps it
    whole where it cannot fit."""
    limit = console.width if width == -1 else width
    shown = list(columns)
    gone = _hoisted(shown, records, hoist)
    if gone:
        first = next(r for r in records if not r.get(SUMMARY))
        said = " · ".join(f"{c}{GLUE}{_plain(first[c])}" for c in gone)
        title = f"{title} · {said}" if title else said
        shown = [c for c in shown if c not in gone]
    if limit is None:
        return _table(title, shown, records, text, None, left, fold)
    used, room = limit + 1, 0
    for dropped in (None, *drop):
        if dropped in text and used <= limit and room >= LEAST_TEXT:
            break  # a text column in `drop` goes only where it is too narrow to read
        if dropped is not None and dropped in shown:
            shown.remove(dropped)
        texts = [c for c in shown if c in text]
        used = _needs(shown, records, text, fold)
        room = (limit - used) // len(texts) if texts else 0
        if used <= limit and (not texts or room >= MIN_TEXT):
            break
    else:  # `drop` spent: a text column too narrow to read goes too
        if used > limit or room < LEAST_TEXT:
            shown = [c for c in shown if c not in text]
    table = _table(title, shown, records, text, max(room, 4), left, fold)
    table.least = _needs(shown, records, text, fold, ("recipe", *fold))
    if table.least > limit:  # wider than the terminal in any case: no recipe folds
        table.least = _needs(shown, records, text, fold, fold)
    return table


def show(console: Console, table: Table, wide: bool = False) -> None:
    """Print `table`; with `wide` at its natural width even past the console's, and a fitted
    table that cannot fit at the width it needs with no cell cut (the terminal wraps the lines;
    a pager or a file keeps them whole)."""
    least = getattr(table, "least", 0)
    if not wide and least <= console.width:
        console.print(table)
        return
    width = console.width  # print caps a width at the console's: widen the console a moment
    console.width = max(width, _natural(table, console) if wide else least)
    try:
        console.print(table, crop=False)
    finally:
        console.width = width
