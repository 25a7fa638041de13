"""One figure from the store: pick its runs, read its rows, draw it (`fsc plot`, `fsc report`)."""

from __future__ import annotations

from dataclasses import dataclass, field
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
    rows: list[dict[str, Any]]  # those the figure draws (see drawn_rows)
    run_ids: list[str]  # the runs drawn
    picked: str = ""  # how the runs were picked when none was named, in words
    left_out: list[str] = field(default_factory=list)  # runs picked or named, none drawn


def drawn_rows(kind: str, rows: list[dict[str, Any]],
               metric: str = "accuracy") -> list[dict[str, Any]]:
    """The rows of its view the `kind` figure draws: an eval figure's cells (DRAWS; quality:
    a reference row only beside its run's decoded cells), every profile or training row."""
    if kind in ("niah", "retrieval"):
        return DRAWS[kind](rows, metric)
    if kind == "quality":
        cells = DRAWS[kind](rows)
        decoded = {r["run_id"] for r in cells if r["mode"] != "reference"}
        return [r for r in cells if r["run_id"] in decoded]
    return DRAWS[kind](rows) if kind in DRAWS else rows


def figure(kind: str, rows: list[dict[str, Any]], colour: dict[str, str],
           metric: str = "accuracy") -> Figure:
    """The `kind` figure of rows of its view (roofline: rows with the cost model's FLOPs, see
    select.with_cost)."""
    build = BUILDERS[kind]
    return build(rows, colour, metric) if kind in ("niah", "retrieval") else build(rows, colour)


def draw(st: Store, kind: str, runs: list[str] | None = None,
         where: str | list[str] | None = None, metric: str = "accuracy",
         colour: dict[str, str] | None = None) -> Drawn:
    """The `kind` figure of `runs` (default: see select.pick_runs) filtered by `where`, a SQL
    condition or several that must all hold (each one --where, see select.condition); colours
    from `colour` (default: one per recipe drawn)."""
    source = SOURCE[kind]
    run_ids = select.pick_runs(st, source, runs or [])
    # each alone (a trailing `-- comment` ends with it); several each bracketed (select._parts)
    where = [select.condition(w) for w in ([where] if isinstance(where, str) else where or [])]
    rows = select.rows(st, source, run_ids, None if not where else where[0] if len(where) == 1
                       else " AND ".join(f"({w})" for w in where))
    if where and not rows:
        given = " and ".join(f'--where "{printable(w, 120)}"' for w in where)
        raise UsageError(f"nothing to plot: {given} leave{'s' if len(where) == 1 else ''} no "
                         f"row of {named('run', run_ids)}")
    if kind == "roofline":
        rows = select.with_cost(st, rows)
    colour = colour or figures.colours(r["recipe"] for r in rows)
    fig = figure(kind, rows, colour, metric)
    shown = drawn_rows(kind, rows, metric)
    # a resumed training run's rows carry the runs it continues as part_of_run
    drawn = {r["run_id"] for r in shown} | {r.get("part_of_run") for r in shown}
    # not drawn: a run named, or picked whose rows --where kept (not one --where left out)
    kept = {r["run_id"] for r in rows} | {r.get("part_of_run") for r in rows}
    return Drawn(kind, fig, shown, [r for r in run_ids if r in drawn],
                 "" if runs else source.describe(),
                 [r for r in run_ids if r not in drawn and (runs or not where or r in kept)])
