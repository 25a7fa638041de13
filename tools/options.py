"""What the tools' command lines share: an option's old spelling, still accepted."""

from __future__ import annotations

import argparse
import sys


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
