"""What the tools' command lines share: an option's old spelling, still accepted; the types of
their counts and lists, so that a bad value is one argparse line (exit 2), not a traceback;
and the boundary that ends a tool on a library error in one line, as `fsc` does."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Iterable


def renamed(parser: argparse.ArgumentParser, old: str, new: str, **kw) -> None:
    """Accept `old` (hidden from --help) as the option `new`, already added to `parser`, after
    one line on stderr; `kw` are the old option's (its `type`)."""

    class Renamed(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            print(f"{parser.prog}: {old} is deprecated, use {new}", file=sys.stderr)
            setattr(namespace, self.dest, values)

    dest = new.lstrip("-").replace("-", "_")
    parser.add_argument(old, dest=dest, action=Renamed, help=argparse.SUPPRESS,
                        default=argparse.SUPPRESS, **kw)


def _int(text: str, least: int) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < least:
        raise argparse.ArgumentTypeError(f"{n} is below {least}")
    return n


def positive(text: str) -> int:
    """argparse type: a whole number, 1 or more (a count of repeats, rounds, samples, jobs)."""
    return _int(text, 1)


def count(text: str) -> int:
    """argparse type: a whole number, 0 or more."""
    return _int(text, 0)


def _parts(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("expected comma-separated whole numbers")
    return parts


def ints(text: str) -> list[int]:
    """argparse type: comma-separated whole numbers, 0 or more ('0,1,2': seeds)."""
    return [count(p) for p in _parts(text)]


def positives(text: str) -> list[int]:
    """argparse type: comma-separated whole numbers, 1 or more ('256,1024': lengths)."""
    return [positive(p) for p in _parts(text)]


def names(allowed: Iterable[str]) -> Callable[[str], list[str]]:
    """argparse type: a comma list of some of `allowed` ('' for none)."""
    allowed = tuple(allowed)

    def parse(text: str) -> list[str]:
        got = [p.strip() for p in text.split(",") if p.strip()]
        if bad := [p for p in got if p not in allowed]:
            raise argparse.ArgumentTypeError(f"unknown {bad[0]!r}; some of {', '.join(allowed)}")
        return got

    return parse


def command(tool: str, argv: list[str] | None) -> str:
    """The command line a tool ran with (`argv`, default this process's), as a run records it:
    quoted as a shell reads it, so it pastes back (an empty or spaced argument stays one)."""
    return shlex.join(["python", "-m", f"tools.{tool}", *(sys.argv[1:] if argv is None
                                                          else argv)])


def boundary(main: Callable[[], object], prog: str) -> None:
    """Run a tool's `main` and exit: a library error (`fsc.errors.FscError`: a bad recipe,
    option or store) ends it with one line on stderr and its exit code, as the `fsc` command
    does; FSC_DEBUG=1 re-raises it for the traceback. Anything else is a bug and keeps its
    traceback."""
    from fsc.errors import FscError

    try:
        rv = main()
    except FscError as e:
        if os.environ.get("FSC_DEBUG") == "1":
            raise
        print(f"{prog}: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)
