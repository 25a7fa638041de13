"""A bar on a terminal's stderr for work that reports its progress as it goes (a long prompt's
fold, a long check), and nothing where stderr is a log or a pipe."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from fsc.cli.common import err


@contextmanager
def terminal_bar(what: str) -> Iterator[Callable[[int, int], None]]:
    """A bar of `what` on a terminal's stderr, from the first report(done, total) the work
    makes until it ends, then gone; nothing elsewhere (in a log or a pipe a transient bar
    leaves an empty line)."""
    from fsc.cli import progress

    bar = progress.bar(err, transient=True)
    task = None

    def report(done: int, total: int) -> None:
        nonlocal task
        if not err.is_terminal:
            return
        if task is None:  # started here: a bar never shown leaves nothing (an empty line)
            bar.start()
            task = bar.add_task(what, total=total)
        bar.update(task, completed=done)

    try:
        yield report
    finally:
        if task is not None:
            bar.stop()
