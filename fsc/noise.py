"""Which measurements are noise: a point whose p10–p90 spread of step times is wide against its
median, and a ratio between two points whose p10–p90 intervals overlap (the difference is not
told apart from the noise). Tables mark such points and write "noise" for such ratios; the
latency figure draws them hollow."""

from __future__ import annotations

from typing import Any

NOISY_SPREAD = 0.5  # p10–p90 wider than half the median: the point's time is mostly noise
MARK = "~"  # after a noisy point's step time in a table
LEGEND = (f"{MARK} noisy: p10–p90 wider than {NOISY_SPREAD:.0%} of the median (more --repeats, "
          "fewer --workers or a quieter machine)")


def _get(p: Any, name: str) -> Any:
    return p.get(name) if isinstance(p, dict) else getattr(p, name, None)


def spread(p: Any, phase: str = "step") -> float | None:
    """(p90 − p10) / median of a point's `phase` times (a PointResult or a profile row), or
    None when it has none."""
    median, p10, p90 = (_get(p, f"{phase}_ms{s}") for s in ("", "_p10", "_p90"))
    if not median or p10 is None or p90 is None:
        return None
    return (p90 - p10) / median


def noisy(p: Any) -> bool:
    s = spread(p)
    return s is not None and s > NOISY_SPREAD


def overlap(a: Any, b: Any, phase: str = "step") -> bool:
    """Whether the p10–p90 intervals of `phase` of two points overlap (unknown: False)."""
    lo_a, hi_a, lo_b, hi_b = (_get(p, f"{phase}_ms_{q}") for p in (a, b) for q in ("p10", "p90"))
    if None in (lo_a, hi_a, lo_b, hi_b):
        return False
    return lo_a <= hi_b and lo_b <= hi_a


def versus(x: dict, k: str) -> str:
    """One cell of a versus-baseline table (a row of fsc.sweep.compare, `k` one of its ratios):
    the ratio, "noise" when it is inside the p10–p90 noise, or why there is none."""
    if x[k] is None:
        return f"baseline {x['baseline_status']}"
    return "noise" if x.get(k.replace("_x", "_noise")) else f"{x[k]:.2f}×"
