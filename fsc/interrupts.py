"""Stopping on a signal: Ctrl-C (SIGINT), SIGTERM (`timeout`, Kubernetes, Slurm at its time
limit or on preemption) and SIGUSR1 / SIGUSR2 (Slurm's early warning, `sbatch --signal`) all
take one path.

`StopSignals` installs one handler for the four while a command works and restores the
previous handlers after. By default a signal raises `Interrupted` where the work is (a sweep
abandons the point under way and keeps the stored ones). With `defer=True` the first signal is
only recorded, for a loop to end after the step under way (training: the checkpoint then holds
a whole step's weights); a second Ctrl-C raises at once, while a repeated SIGTERM or SIGUSR is
absorbed (schedulers repeat them before their SIGKILL). Inside `held()` (a store write) a
signal that would raise waits until the section ends, so a row is written whole or not at all.
A `StopSignals` opened inside another (training's loop inside `fsc train`) starts from the
signal the outer one recorded, and hands its own back when it closes: a signal that came while
a command set up (built the model, read the data) is not lost when its loop begins. Where
neither defers, the inner one raises as it opens: the outer one raised for that signal and
the work went on, so the raise was lost (Python drops an exception raised in a `__del__`).

A command stopped by a signal exits with 128 + its number (130 for Ctrl-C, 143 for SIGTERM),
the status a shell reports for a process that signal ended.

A signal that comes while a module is being imported is delivered once the import is done:
raised inside one, it can be lost (C code that clears Python errors as torch's and numpy's
initialisation do: a Ctrl-C in a command's first second was ignored, or left numpy half
imported), so the handler defers it and has it sent again every 50 ms until no import is
under way.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)


def exit_code(signum: int) -> int:
    """The exit status of a command a signal stopped: 128 + its number."""
    return 128 + int(signum)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def ignore_stops() -> None:
    """From here on the four stop signals are ignored: for a process whose command has ended and
    said so, where a scheduler's repeated SIGTERM or a Ctrl-C while torch's exit handlers run
    would otherwise change its exit status or print a traceback after its output."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)


REDELIVER_S = 0.05  # how often a signal deferred during an import is tried again

_received: list[int] = []  # the last stop signal a handler received in this process


def command_stops() -> StopSignals:
    """The stops a whole command runs under (the console script's): SIGTERM, SIGUSR1 and
    SIGUSR2, which by default end a process without a word, raise `Interrupted` as Ctrl-C
    does, so that a command with no handler of its own (`fsc build`, `fsc decode` of one
    prompt) ends in the one line and exit status of any other interruption; and none is lost
    in an import. A signal the process was started with ignored (`nohup`, a background job)
    stays ignored."""
    default = {signal.SIGINT: signal.default_int_handler}
    return StopSignals(signals=tuple(s for s in STOP_SIGNALS
                                     if signal.getsignal(s) == default.get(s, signal.SIG_DFL)))


def last_signal() -> int:
    """The stop signal a handler received last in this process; SIGINT when none did (a
    Ctrl-C that Python's own handler took)."""
    return _received[-1] if _received else signal.SIGINT


def swallowed(e: BaseException | None) -> bool:
    """Whether `e` (or what caused it) is a library's own error made of a stop signal raised
    inside it: DuckDB turns one raised while a query runs into "Query interrupted"."""
    while e is not None:
        if type(e).__name__ == "InterruptException" or (
                isinstance(e, RuntimeError) and str(e) == "Query interrupted"):
            return True
        e = e.__cause__ or e.__context__
    return False


def _again(signum: int) -> None:
    """Signal `signum` to the main thread again (a real signal, which wakes a blocking call as
    the first did), while a Python handler takes it: one that has since given way to the
    default action or to ignoring it is not woken."""
    if callable(signal.getsignal(signum)):
        signal.pthread_kill(threading.main_thread().ident, signum)


def _importing(frame) -> bool:
    """Whether a module is being imported where the frame `frame` runs."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class Interrupted(KeyboardInterrupt):
    """A stop signal, raised where the work was. A KeyboardInterrupt, so that everything that
    handles Ctrl-C handles every stop signal the same way."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return exit_code(self.signum)


class Stopped(Interrupted):
    """A run a stop signal ended, raised once its session has marked it interrupted: the run,
    how many of its points or cells the store keeps, and of how many (None: not known)."""

    def __init__(self, signum: int, run_id: str, kept: int, total: int | None = None):
        super().__init__(signum)
        self.run_id, self.kept, self.total = run_id, kept, total


def signum_of(e: BaseException) -> int:
    """The signal behind an interruption (SIGINT for a plain KeyboardInterrupt)."""
    return getattr(e, "signum", signal.SIGINT)


class StopSignals:
    """A context that turns SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 into one way of stopping (see
    the module's docstring). `signum` is the first stop signal received (None before any);
    `forward(signum)`, when given, is called with every one (a launcher passes them on to the
    processes it started). `signals` replaces the four. Outside the main thread, where Python
    cannot set handlers, it does nothing."""

    def __init__(self, defer: bool = False, forward: Callable[[int], None] | None = None,
                 signals: tuple[int, ...] = STOP_SIGNALS):
        self.defer, self.forward, self.signals = defer, forward, signals
        self.signum: int | None = None
        self._holding = self._pending = False
        self._previous: dict[int, Any] = {}
        self._outer: StopSignals | None = None  # the one this opened inside, if any
        self._deferred: threading.Timer | None = None  # a signal to deliver after an import

    def _handler(self, signum: int, frame) -> None:
        if _importing(frame):  # raised here it could be lost: again once the import is done
            if self._deferred is None or not self._deferred.is_alive():
                self._deferred = threading.Timer(REDELIVER_S, _again, (signum,))
                self._deferred.daemon = True
                self._deferred.start()
            return
        _received[:] = [signum]
        repeated = self.signum is not None
        if not repeated:
            self.signum = signum
        if self.forward is not None:
            self.forward(signum)
        if self.defer and not (repeated and signum == signal.SIGINT):
            return
        if self._holding:
            self._pending = True
        else:
            raise Interrupted(self.signum)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            outer = getattr(signal.getsignal(signal.SIGINT), "__self__", None)
            if isinstance(outer, StopSignals) and outer.signum is not None and not (
                    self.defer or outer.defer):
                # the outer context raised for this signal, and the work went on: the raise was
                # lost where Python drops an exception (a __del__ the signal came in, a C
                # library's call back); the work it stopped stops here
                raise Interrupted(outer.signum)
            for s in self.signals:
                self._previous[s] = signal.signal(s, self._handler)
            if isinstance(outer, StopSignals):
                self._outer = outer
                self.signum = self.signum or outer.signum  # one that came before this opened
        return self

    def __exit__(self, *exc) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)
        self._previous.clear()
        if self._outer is not None:
            self._outer.signum = self._outer.signum or self.signum
            self._outer = None

    @contextmanager
    def held(self):
        """A section no stop signal breaks into: one that comes raises when it ends."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self._pending:
            self._pending = False
            raise Interrupted(self.signum)
