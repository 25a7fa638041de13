"""Asking before a command removes data: --yes, or a person at a terminal agrees."""

from __future__ import annotations

import sys

import typer

from fsc.cli.common import err, printable
from fsc.errors import UsageError


def confirm(question: str, yes: bool) -> None:
    """Go on when `yes` (--yes was given) or when a person at the terminal says yes; without a
    terminal, stop with a usage error (exit 2) that says to pass --yes."""
    if yes:
        return
    question = printable(question, None)
    if not sys.stdin.isatty():
        raise UsageError(f"{question}: pass --yes to confirm")
    if not typer.confirm(f"{question}?", err=True):
        err.print("nothing changed")
        raise typer.Exit(1)
