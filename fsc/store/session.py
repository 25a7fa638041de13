"""One run's life in the store, in one place: `Store.run(...)` registers the recipes and the
environment, starts the run, hands out the writes, and on leaving marks it finished, failed or
interrupted. Profile, train, eval and tools/bench all go through it.

    with store.run("train", command, config, recipes=[recipe], environment=env) as run:
        run.interrupt_note = lambda signal: f"interrupted in step {n} by {signal}"
        run.held = stops.held  # fsc.interrupts.StopSignals: a signal waits for a write
        ...
        run.add_rows("train_steps", rows)
        run.end("interrupted", "stopped by SIGTERM after step 40, saved")  # not finished

On leaving without an exception the run is finished, or ended as `end` said; the points this
process stored are checked to be there first (`Store.finish_run`). A KeyboardInterrupt (Ctrl-C
or any stop signal, see fsc.interrupts) marks it interrupted with `interrupt_note`, another
exception marks it failed with the exception's type and text; both propagate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from fsc.interrupts import signal_name, signum_of
from fsc.store.schema import Column


class RunWriter(Protocol):
    """What a session writes through: fsc.store.Store (named here, not imported, so the
    store's module and this one do not import each other)."""

    def add_point(self, run_id: str, point: dict[str, Any],
                  samples: dict[str, list[float]] | None = None) -> int: ...

    def add_rows(self, table: str, run_id: str, rows: list[dict[str, Any]],
                 columns: Sequence[Column] = ()) -> None: ...

    def add_bench(self, run_id: str, name: str, value: float, unit: str,
                  params: dict[str, Any] | None = None) -> None: ...

    def finish_run(self, run_id: str, status: str = "finished", error: str | None = None,
                   points: list[int] | None = None) -> None: ...


@dataclass
class RunSession:
    store: RunWriter
    run_id: str
    # How an interruption reads, given the signal's name: 'interrupted (SIGTERM) after ...'.
    interrupt_note: Callable[[str], str] = lambda name: f"interrupted ({name})"
    # A section no stop signal breaks into (StopSignals.held): each write, with its count
    # below, and the run's end happen whole.
    held: Callable[[], AbstractContextManager] = nullcontext
    points: list[int] = field(default_factory=list)  # ids add_point returned here
    rows: int = 0  # rows add_rows stored here
    ending: tuple[str, str | None] = ("finished", None)

    def add_point(self, point: dict[str, Any], samples: dict[str, list[float]] | None = None) -> int:
        with self.held():
            point_id = self.store.add_point(self.run_id, point, samples)
            self.points.append(point_id)
        return point_id

    def add_rows(self, table: str, rows: list[dict[str, Any]],
                 columns: Sequence[Column] = ()) -> None:
        """Rows of this run (`columns`: the declared ones they may carry, see Store.add_rows)."""
        with self.held():
            self.store.add_rows(table, self.run_id, rows, columns)
            self.rows += len(rows)

    def add_bench(self, name: str, value: float, unit: str, params: dict | None = None) -> None:
        with self.held():
            self.store.add_bench(self.run_id, name, value, unit, params)

    def end(self, status: str, note: str | None = None) -> None:
        """How the run ends when the block is left without an exception."""
        self.ending = (status, note)

    def _close(self, exc: BaseException | None) -> None:
        with self.held():
            if exc is None:
                self.store.finish_run(self.run_id, *self.ending, points=self.points)
            elif isinstance(exc, KeyboardInterrupt):
                self.store.finish_run(self.run_id, "interrupted",
                                      self.interrupt_note(signal_name(signum_of(exc))),
                                      self.points)
            else:
                self.store.finish_run(self.run_id, "failed", f"{type(exc).__name__}: {exc}")
