"""The figures of `fsc plot` and `fsc report`, drawn with matplotlib on its Agg canvas: the
builder of each kind (BUILDERS) and the evaluation rows each eval figure draws (DRAWS).

Each builder takes rows of a store view (dicts, as `fsc.results.select.rows` returns them) and
a colour per recipe, and returns a matplotlib Figure. Titles carry what is drawn, the device and
the run ids; axes carry units. The builders live in `profile_figures` and `eval_figures`, the
machinery they share in `axes`; the names callers use (colours, render, save, ...) are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable

from matplotlib.figure import Figure

from fsc.results.axes import DPI, PALETTE, Rows, colours, grouped, render, save, tokens
from fsc.results.eval_figures import (
    loss,
    niah,
    niah_cells,
    retrieval,
    retrieval_cells,
    ruler,
    ruler_cells,
)
from fsc.results.profile_figures import latency, memory, roofline, throughput

__all__ = ["BUILDERS", "DPI", "DRAWS", "PALETTE", "colours", "grouped", "latency", "loss",
           "memory", "niah", "render", "retrieval", "roofline", "ruler", "save", "throughput",
           "tokens"]

DRAWS: dict[str, Callable[[Rows], Rows]] = {"niah": niah_cells, "retrieval": retrieval_cells,
                                            "ruler": ruler_cells}

BUILDERS: dict[str, Callable[..., Figure]] = {
    "latency": latency, "memory": memory, "throughput": throughput, "roofline": roofline,
    "loss": loss, "niah": niah, "retrieval": retrieval, "ruler": ruler,
}

