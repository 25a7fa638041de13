"""One figure from the store: pick its runs, read its rows, draw it (`fsc plot`, `fsc report`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

from fsc.errors import UsageError
from fsc.results import figures, quality, select
from fsc.store import Store
from fsc.text import named, printable

SOURCE = {"latency": select.PROFILE_OK, "memory": select.PROFILE_OK,
          "throughput": select.PROFILE_OK, "roofline": select.PROFILE_OK, "loss": select.TRAINING, "niah": select.NIAH,
          "retrieval": select.RETRIEVAL, "ruler": select.RULER,
          "quality": select.QUALITY}
BUILDERS = {**figures.BUILDERS, "quality": quality.quality}
DRAWS = {**figures.DRAWS, "quality": quality.quality_cells}  # the rows each eval figure draws


@dataclass
class Drawn:
    kind: str
    figure: Figure
    rows: list[dict[str, Any]]
    run_ids: list[str]
    picked: str = ""  # how the runs were picked when none was named, in words


def figure(kind: str, rows: list[dict[str, Any]], colour: dict[str, str],
           metric: str = "accuracy") -> Figure:
    """The `kind` figure of rows of its view (roofline: rows with the cost model's FLOPs, see
    select.with_cost)."""
    build = BUILDERS[kind]
    return build(rows, colour, metric) if kind in ("niah", "retrieval") else build(rows, colour)


def draw(st: Store, kind: str, runs: list[str] | None = None, where: str | None = None,
         metric: str = "accuracy", colour: dict[str, str] | None = None) -> Drawn:
    """The `kind` figure of `runs` (default: see select.pick_runs) filtered by `where`; colours
    from `colour` (default: one per recipe drawn)."""
    source = SOURCE[kind]
    run_ids = select.pick_runs(st, source, runs or [])
    rows = select.rows(st, source, run_ids, where)
    if where is not None and not rows:
        raise UsageError(f'nothing to plot: --where "{printable(where)}" leaves no row of '
                         f"{named('run', run_ids)}")
    if kind == "roofline":
        rows = select.with_cost(st, rows)
    colour = colour or figures.colours(r["recipe"] for r in rows)
    return Drawn(kind, figure(kind, rows, colour, metric), rows, run_ids,
                 "" if runs else source.describe())
