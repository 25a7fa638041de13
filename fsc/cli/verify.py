"""Commands of this group (filled in by its issue)."""

import typer


def register(app: typer.Typer) -> None:
    pass
