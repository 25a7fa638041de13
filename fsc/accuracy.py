"""How far a computation is from its reference, as the checks that compare them read it
(`fsc verify`, the kernels' self-check and accuracy points)."""

from __future__ import annotations

import math


def worst_error(errors) -> float:
    """The largest of `errors`, NaN where any is (a NaN or inf on either path): Python's max
    keeps a number it met before a NaN, and a NaN must fail a check, not vanish."""
    errors = list(errors)
    return math.nan if any(math.isnan(e) for e in errors) else max(errors)
