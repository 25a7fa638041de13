"""Bounds of the values `fsc profile` and `fsc estimate` take: far beyond any real decoding point
or device, small enough that a typo (`--B 1e9`, `--memory 1e-30`) is refused rather than
computed with. G's bound is fsc.blocks.MAX_G (the recipe schema's)."""

from __future__ import annotations

import typer

MAX_S = 2**24  # tokens of context (16M)
MAX_B = 4096  # sequences decoded together

# Device figures, (low, high). Below these the floor time divides by next to nothing.
TB_S = (1e-3, 1e3)  # memory bandwidth, TB/s
TFLOPS = (1e-3, 1e6)  # dense matrix peak, TFLOP/s
GB = (1e-3, 1e6)  # device memory, GB


def between(low: int, high: int):
    """A typer callback: the option's integer must lie in [low, high]. (Typer's own min/max
    messages do not always name the value given.)"""

    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value} must be between {low} and {high}")
        return value

    return check
