"""The one layout of every fsc progress bar: description, bar, count (M/N), time elapsed and,
where the work's pace is steady enough to say, time remaining.

A narrow line (an 80-column terminal, or a log, which rich lays out at 80 columns) keeps the
count and the times whole: the bar gives way first, down to one column, then the description,
cut with an ellipsis on its one line. Only a line too short for the count and the times alone
cuts them. In rich's table of a Progress (rich.table.Table) the bar is the one flexible column
(a ratio: it takes what the others leave of the line) and the description the one column the
table narrows when the line is still too long (the others are no_wrap); its text is no_wrap
itself, so narrowing cuts it instead of folding it onto a second line. The bar spans the line.
Imported only where a bar is shown: `fsc --help` does not load rich.progress."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column
from rich.text import Text


class _Description(ProgressColumn):
    """The task's description as it is (no markup, like the consoles' text), on one line."""

    def render(self, task) -> Text:
        return Text(task.description, no_wrap=True, overflow="ellipsis")


def bar(console: Console, *, transient: bool, remaining: bool = True) -> Progress:
    """A Progress on `console` laid out as the module says; `transient` removes it when it
    stops, `remaining` adds the time remaining."""
    def whole() -> Column:  # one the table does not narrow (see the module)
        return Column(no_wrap=True)

    times = [TimeElapsedColumn(table_column=whole())]
    if remaining:
        times.append(TimeRemainingColumn(table_column=whole()))
    return Progress(_Description(),
                    BarColumn(bar_width=None, table_column=Column(ratio=1, no_wrap=True)),
                    MofNCompleteColumn(table_column=whole()), *times,
                    console=console, transient=transient, expand=True)
