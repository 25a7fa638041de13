"""Which measurements are noise: a point whose p10–p90 spread of step times is wide against its
median, and a ratio between two points whose p10–p90 intervals overlap (the difference is not
told apart from the noise). Tables mark such points and write "noise" for such ratios; the
latency figure draws them hollow. A ratio is judged on the interval of the measure it names:
step latency on the step's, tokens/s (and time per block) on the block's, K·step + fold."""

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


def interval(p: Any, phase: str = "step") -> tuple[float, float] | None:
    """A point's p10–p90 interval of `phase` ("step" or "fold"), ms, or of "time", the time
    per block that tokens/s inverts: K·step + fold, from K·p10 + p10 to K·p90 + p90 (ar, K 0:
    the fold's), or of "token", that time over the block's B·G tokens (points of different
    batches compared on tokens/s). None when it was not measured."""
    if phase == "token":
        block = interval(p, "time")
        tokens = (_get(p, "B") or 1) * (_get(p, "G") or 1)
        return None if block is None else (block[0] / tokens, block[1] / tokens)
    if phase == "time":
        K = _get(p, "K") or 0
        step, fold = interval(p, "step"), interval(p, "fold")
        if fold is None or (K and step is None):
            return None
        return (K * step[0] if K else 0) + fold[0], (K * step[1] if K else 0) + fold[1]
    lo, hi = _get(p, f"{phase}_ms_p10"), _get(p, f"{phase}_ms_p90")
    return None if lo is None or hi is None else (lo, hi)


def overlap(a: Any, b: Any, phase: str = "step") -> bool | None:
    """Whether the p10–p90 intervals of `phase` (see `interval`) of two points overlap (None:
    one was not measured)."""
    ia, ib = interval(a, phase), interval(b, phase)
    if ia is None or ib is None:
        return None
    return ia[0] <= ib[1] and ib[0] <= ia[1]


def versus(x: dict, k: str) -> str:
    """One cell of a versus-baseline table (a row of fsc.sweep_results.compare, `k` one of its
    ratios): the ratio, "noise" when it is inside the p10–p90 noise, or why there is none (the
    recipe's own point out of memory or failed, or the baseline's)."""
    if x.get("status", "ok") != "ok":
        return str(x["status"])
    if x[k] is None:
        return f"baseline {x['baseline_status']}"
    return "noise" if x.get(k.replace("_x", "_noise")) else f"{x[k]:.2f}×"
