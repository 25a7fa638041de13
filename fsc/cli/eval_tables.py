"""The tables of `fsc eval` at the terminal's width, laid out by the rule of every result table
of fsc (fsc.cli.tables): no number, header word or row label is ever cut.

- A table of named columns (loss, genppl, harness) is `fitted`: a column whose cells are all
  the same is said in the title where the table names it (genppl's length and samples), and
  the least read columns go first (`*_DROP`, in order) until the rest fits; every figure stays
  in the store and in --json. A table that still does not fit is printed whole, wider.
- A heatmap (a column per length: niah, mqar, the suite) keeps every cell: its lengths that do
  not fit on one line go into as few tables as fit, one under the other, each with the row
  labels, so that every cell still reads beside its depth and its length. (A heatmap printed
  wider than the terminal would have its rows wrapped by the terminal, each row's last cells
  under its first.) A header "16384 (128×)" takes two lines, the length over its ratio, only
  where that saves a table. Where not even one length fits beside the labels, the heatmap is
  printed whole, wider.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from fsc.cli.tables import Fitted, fitted, show

LOSS_COLUMNS = ("length", "sequences", "loss (nats/token)", "± s.e.", "bits/byte")
LOSS_DROP = ("sequences", "bits/byte", "± s.e.")  # the loss itself and its length stay
GENPPL_COLUMNS = ("decoding", "length", "Gen-PPL", "95 % interval", "entropy", "rep", "tok/s",
                  "passes/tok", "steps/block", "samples")
# Gen-PPL is read with the entropy beside it (a sampler that repeats itself scores well too)
GENPPL_DROP = ("passes/tok", "steps/block", "rep", "samples", "95 % interval", "tok/s",
               "entropy")
HARNESS_COLUMNS = ("task", "metric", "value", "± s.e.", "n", "shots")
HARNESS_DROP = ("shots", "n", "± s.e.")


def show_loss(records: list[dict], console: Console) -> None:
    """A loss table of `records` (column -> cell)."""
    show(console, fitted(None, LOSS_COLUMNS, records, console, LOSS_DROP))


def show_genppl(records: list[dict], console: Console) -> None:
    """A genppl table of `records`: one length and one number of samples said in its title."""
    show(console, fitted(None, GENPPL_COLUMNS, records, console, GENPPL_DROP,
                         hoist=("length", "samples"), left=("decoding",)))


def show_harness(records: list[dict], console: Console) -> None:
    """A harness table of `records`: the task and metric names whole, on the left."""
    show(console, fitted(None, HARNESS_COLUMNS, records, console, HARNESS_DROP,
                         left=("task", "metric")))


def show_heatmap(key: str, heads: list[str], rows: list[tuple[str, list[Text | str]]],
                 console: Console, left: bool = False) -> None:
    """A heatmap: a row (its label, its cell under each of `heads`) per depth (`key`), in as
    few tables as fit the console's width (see the module docstring); `left`: the labels on
    the left (names, not numbers)."""
    label = max(cell_len(s) for s in [key, *(r[0] for r in rows)])
    cells = [[_plain(r[1][j]) for r in rows] for j in range(len(heads))]
    whole = [max(cell_len(s) for s in [h, *c]) for h, c in zip(heads, cells, strict=True)]
    wrapped = [max(cell_len(s) for s in [*h.split(), *c]) for h, c in zip(heads, cells,
                                                                          strict=True)]

    def needs(part: list[int], widths: list[int]) -> int:
        return label + sum(widths[j] for j in part) + 3 * (len(part) + 1) + 1

    for k in range(1, len(heads) + 1):
        parts = _balanced(len(heads), k)
        for widths in (whole, wrapped):
            if all(needs(p, widths) <= console.width for p in parts):
                for p in parts:
                    show(console, _heatmap(key, heads, rows, p, left,
                                           None if widths is whole else wrapped))
                return
    show(console, _heatmap(key, heads, rows, list(range(len(heads))), left, None,
                           needs(list(range(len(heads))), whole)))


def _plain(cell: Text | str) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _balanced(n: int, k: int) -> list[list[int]]:
    """0 .. n-1 in k runs in order, as even as can be (the first the longer)."""
    size, more = divmod(n, k)
    runs, start = [], 0
    for i in range(k):
        end = start + size + (i < more)
        runs.append(list(range(start, end)))
        start = end
    return runs


def _heatmap(key: str, heads: list[str], rows: list[tuple[str, list]], part: list[int],
             left: bool, widths: list[int] | None, least: int = 0) -> Fitted:
    """The heatmap's columns in `part`, each header on one line, or at `widths` (the length
    over its ratio); `least`: the width it is printed at where wider than the terminal."""
    table = Fitted()
    table.least = least
    table.add_column(key, justify="left" if left else "right", no_wrap=True)
    for j in part:
        if widths is None:
            table.add_column(heads[j], justify="right", no_wrap=True)
        else:
            table.add_column(heads[j], justify="right", width=widths[j])
    for name, row in rows:
        table.add_row(name, *(row[j] for j in part))
    return table
