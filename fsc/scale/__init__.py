"""Running sweeps beyond this process: local worker processes, Ray, Slurm (submitit); and
data-parallel training under torchrun. This module is light: the CLI checks options with it
before torch is imported.

`ExecutorSettings` is where a command's work runs, checked; `Watch` is what a command shows of a
run while the library works; `recording` is a run's session under stop signals (for
fsc.scale.profiling and fsc.scale.evaluation).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fsc.errors import UsageError
from fsc.interrupts import Stopped, StopSignals, signum_of

if TYPE_CHECKING:
    from fsc.store import Store
    from fsc.store.session import RunSession

EXTRAS = {"ray": ("ray", "fsc[ray]"), "slurm": ("submitit", "fsc[slurm]")}
# The settings only one executor reads.
OWN = {"local": (), "ray": ("address",),
       "slurm": ("slurm_partition", "slurm_gpus_per_node", "slurm_time")}
_ADDRESS = re.compile(r"auto|local|ray://[\w.\-]+:\d{1,5}|[\w.\-]+:\d{1,5}")


def needs(executor: str) -> None:
    """UsageError unless the executor's optional package is installed."""
    if executor in EXTRAS:
        module, extra = EXTRAS[executor]
        if importlib.util.find_spec(module) is None:
            raise UsageError(f"--executor {executor} needs {module}: pip install '{extra}'")


def option(name: str) -> str:
    """The command-line option of a setting: slurm_time -> --slurm-time."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class ExecutorSettings:
    """Where a sweep's points (or an eval grid's lengths) run: `executor` local (`workers`
    processes; 1: this process), ray (the cluster at `address`) or slurm (job arrays); a group
    whose worker died or failed runs again `retries` times."""

    executor: str = "local"
    workers: int = 1
    address: str = "auto"
    retries: int = 1
    slurm_partition: str | None = None
    slurm_gpus_per_node: int = 1
    slurm_time: int = 60  # minutes an array task may run

    @property
    def remote(self) -> bool:
        """Whether anything runs outside this process."""
        return self.executor != "local" or self.workers > 1

    def check(self, given: Iterable[str] = ()) -> ExecutorSettings:
        """These settings, or UsageError: for options of another executor among `given` (the
        options a user set: --slurm-time), --retries where nothing runs outside this process
        (no worker to die and run again), an empty partition, a Ray address of no known form,
        or an executor whose package is missing. Cheap and torch-free: commands call it before
        any work."""
        given = set(given)
        foreign = [option(name) for kind, names in OWN.items() if kind != self.executor
                   for name in names if option(name) in given]
        if foreign:
            raise UsageError(f"{', '.join(foreign)} {'does' if len(foreign) == 1 else 'do'} not "
                             f"apply to --executor {self.executor}")
        if "--retries" in given and not self.remote:
            raise UsageError(f"--retries {self.retries}: --executor local with one worker runs "
                             "every group in this process, with no worker to die and run again; "
                             "give --workers N (N > 1), --executor ray or slurm, or drop "
                             "--retries")
        if self.slurm_partition is not None and not self.slurm_partition.strip():
            raise UsageError("--slurm-partition is empty; name a partition, or leave the "
                             "option out for the cluster's default")
        if self.executor == "ray" and not _ADDRESS.fullmatch(self.address):
            raise UsageError(f"--address {self.address[:60]!r} is not auto, local, "
                             "ray://HOST:PORT or HOST:PORT")
        needs(self.executor)
        return self


def _quiet(*args: Any) -> None:
    """Shows nothing."""


@dataclass
class Watch:
    """What a caller shows of a run while the library works: `say(line)` for a notice,
    `started(run_id, total, done, rough_s)` once the run is recorded (`done` of `total` items
    already stored; `rough_s`: the cost model's guess of the time left on a CPU, else None),
    `stored(item)` after each point or cell is stored, and `advanced(n)` as n more of the
    items `started` counts are done (where those are not the stored ones: genppl's samples)."""

    say: Callable[[str], None] = _quiet
    started: Callable[[str, int, int, float | None], None] = _quiet
    stored: Callable[[Any], None] = _quiet
    advanced: Callable[[int], None] = _quiet


@contextmanager
def recording(st: Store, kind: str, command: str, config: dict, *, before: int = 0,
              total: int | None = None, **run: Any) -> Iterator[RunSession]:
    """`st.run(kind, command, config, **run)` (fsc.store.session) under stop signals
    (fsc.interrupts): each write is held whole, and a signal ends the run interrupted, then
    raises Stopped with how much of the run the store keeps (`before` items stored earlier,
    and the points and rows stored here) of `total`."""
    session = None
    try:
        with StopSignals() as stops, st.run(kind, command, config, **run) as session:
            session.held = stops.held
            yield session
    except KeyboardInterrupt as e:
        if session is None:
            raise
        kept = before + len(session.points) + session.rows
        raise Stopped(signum_of(e), session.run_id, kept, total) from None
