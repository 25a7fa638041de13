"""Entry point: the Typer app, command registration and the one error boundary."""

from __future__ import annotations

import os
import sys

import click
import typer

from fsc import __version__
from fsc.cli import artifacts, build, decode, estimate, profile, query, recipes, verify
from fsc.errors import FscError

app = typer.Typer(
    name="fsc",
    help="Build, decode, profile and share attention, Mamba, linear-attention and hybrid LMs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

for module in (recipes, build, decode, verify, profile, query, estimate, artifacts):
    module.register(app)


def _version(value: bool) -> None:
    if value:
        print(f"fsc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """fsc: a decode-time architecture workstation."""


def run() -> None:
    """Console script: map library errors to one line and an exit code."""
    try:
        rv = app(standalone_mode=False)
    except FscError as e:
        if os.environ.get("FSC_DEBUG") == "1":
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":
    run()
