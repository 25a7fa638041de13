"""What the tools' command lines share: an option's old spelling, still accepted; the types of
their counts and lists, so that a bad value is one argparse line (exit 2), not a traceback;
and the boundary that ends a tool on a library error in one line, as `fsc` does."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fsc.store import Store


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


def _once(values: list[int]) -> list[int]:
    """`values`, each given once: a seed or a length twice is two runs of one thing (two
    trainings into one folder), never what was meant."""
    if twice := sorted({v for v in values if values.count(v) > 1}):
        raise argparse.ArgumentTypeError(f"{', '.join(map(str, twice))} given twice")
    return values


def ints(text: str) -> list[int]:
    """argparse type: comma-separated whole numbers, 0 or more, each once ('0,1,2': seeds)."""
    return _once([count(p) for p in _parts(text)])


def positives(text: str) -> list[int]:
    """argparse type: comma-separated whole numbers, 1 or more, each once ('256,1024':
    lengths)."""
    return _once([positive(p) for p in _parts(text)])


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


class Refused(SystemExit):
    """A bad value a tool finds after argparse (an unknown name in a list, a combination it
    cannot run): exit 2, as argparse's own refusals; `str()` is the message, which `boundary`
    prints in one line."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def check_store(store: Path | None) -> Store:
    """The store a tool records in (`--store`, else FSC_STORE, else ./store), checked before any
    work: a path that cannot hold one is one line (exit 2), not a traceback after the work."""
    from fsc.cli.common import check_store as checked

    return checked(store)


def boundary(main: Callable[[], object], prog: str) -> None:
    """Run a tool's `main` and exit: a library error (`fsc.errors.FscError`: a bad recipe,
    option or store) ends it with one line on stderr and its exit code, as the `fsc` command
    does; FSC_DEBUG=1 re-raises it for the traceback; a `Refused` value is one line and exit 2.
    Anything else is a bug and keeps its traceback."""
    from fsc.errors import FscError

    try:
        rv = main()
    except Refused as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        sys.exit(2)
    except FscError as e:
        if os.environ.get("FSC_DEBUG") == "1":
            raise
        print(f"{prog}: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)
