"""What `fsc eval` shows of its retrieval cells' answers (the `answers` column: a sample's
expected and decoded answer): the first wrong one of each cell under the table, and the
column as JSON in --json's rows."""

from __future__ import annotations

import json

from fsc.cli.common import out, printable
from fsc.text import counted


def label(c) -> str:
    """What names a cell in a line: 'niah multikey length 512 depth 0.5', 'mqar length 256
    pairs 8'."""
    variant = c.get("variant")
    return (c.task + (f" {variant}" if c.task == "niah" and variant not in (None, "single")
                      else "") + f" length {c.length}"
            + (f" depth {c.depth:g}" if c.depth is not None else "")
            + (f" pairs {c.pairs}" if c.pairs is not None else ""))


def json_row(c) -> dict:
    """A cell's row in `fsc eval --json`: its columns, `answers` as JSON rather than the JSON
    text the store holds."""
    row = c.columns()
    if isinstance(row.get("answers"), str):
        row["answers"] = json.loads(row["answers"])
    return row


WRONG_SHOWN = 5  # cells whose first wrong answer is shown under a retrieval table


def show_wrong(cells: list) -> None:
    """Under a retrieval table: the first wrong answer of each cell that has one (at most
    WRONG_SHOWN cells), and where every answer is (the cells' `answers` column)."""
    wrong = [(c, a) for c in cells if c.get("answers") for a in
             [next((a for a in json.loads(c.get("answers")) if a["score"] < 1), None)] if a]
    if not wrong:
        return
    shown = f"; {WRONG_SHOWN} shown" if len(wrong) > WRONG_SHOWN else ""
    out.print(f"Wrong answers, the first of each cell ({len(wrong)} of "
              f"{counted(len(cells), 'cell')}{shown}; every answer: the store's "
              "evaluation.answers, or --json):", markup=False, highlight=False)
    for c, a in wrong[:WRONG_SHOWN]:
        expected, decoded = a["expected"], a["decoded"]
        if isinstance(decoded, list):  # mqar: its first wrong query
            # (a query scored wrong whose text reads right: a special token the text drops)
            i = next((i for i, (e, d) in enumerate(zip(expected, decoded, strict=True))
                      if e != d), 0)
            expected, decoded = [expected[i]], decoded[i]
        out.print(f"  {label(c)}: expected {_quoted(', '.join(expected))}, decoded "
                  f"{_quoted(decoded)}", markup=False, highlight=False)


def _quoted(text: str) -> str:
    return '"' + printable(text, 60) + '"'
