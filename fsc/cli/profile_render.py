"""What `fsc profile` prints: the results fitted to the terminal, each recipe against a baseline,
and the points of a dry run. Recipe names and error text go to rich as plain Text (never as
markup) after `printable`, so a name like "[/bold]" or an ANSI escape prints as itself."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from fsc import noise
from fsc.cli.common import fmt_bytes, printable
from fsc.cli.tables import fitted, show
from fsc.sweep import PointResult, compare

# Result columns in display order. On a narrow terminal the DROP_FIRST ones go, in that order,
# until the table fits: recipe names stay whole, and every figure stays in the store and --json.
RESULT_COLUMNS = ("recipe", "S", "B", "G", "K", "step ms", "p10–p90", "fold ms", "tok/s", "peak",
                  "cache", "GB/s", "floor ms", "roofline")
DROP_FIRST = ("p10–p90", "floor ms", "GB/s", "cache", "roofline", "fold ms", "peak")


def _cells(r) -> dict:
    """One PointResult's table cells."""
    cells = {"recipe": Text(printable(r.recipe)), "S": str(r.S), "B": str(r.B), "G": str(r.G),
             "K": str(r.K), "cache": fmt_bytes(r.cache_bytes)}
    if r.status != "ok":
        cells["step ms"] = Text(r.status, "red")
        return cells
    return cells | {
        "step ms": Text(f"{r.step_ms:.3f} {noise.MARK}", "yellow") if noise.noisy(r)
        else f"{r.step_ms:.3f}",
        "p10–p90": f"{r.step_ms_p10:.2f}–{r.step_ms_p90:.2f}",
        "fold ms": f"{r.fold_ms:.3f}",
        "tok/s": f"{r.tokens_per_s:.0f}",
        "peak": fmt_bytes(r.peak_bytes),
        "GB/s": f"{r.achieved_gbps:.1f}" if r.achieved_gbps else "-",
        "floor ms": f"{r.floor_ms:.3f}" if r.floor_ms else "-",
        "roofline": f"{100 * r.roofline_fraction:.0f}%" if r.roofline_fraction else "-",
    }


def render_rows(rows: list[PointResult], run_id: str, where: str, follow_up: str, console: Console,
                errors: Console, wide: bool = False) -> None:
    """The results of a sweep, each recipe against the baseline, failed points on `errors`,
    and the query that shows the run (on a line of its own, never wrapped, to copy)."""
    setting = ", ".join(sorted({f"{r.dtype} on {r.device}" for r in rows}))
    width = None if wide else -1
    show(console, fitted(f"profile {run_id}: {setting}", RESULT_COLUMNS,
                         [_cells(r) for r in rows], console, DROP_FIRST, width=width), wide)
    if any(noise.noisy(r) for r in rows if r.status == "ok"):
        console.print(noise.LEGEND, style="yellow", markup=False, highlight=False)
    ran = sorted({f"{k}:{v}" for r in rows for k, v in (r.mixer_backends or {}).items()})
    if ran:
        console.print(f"kernels ran: {', '.join(ran)}", style="dim", markup=False, highlight=False)
    comp = compare(rows)
    if comp:
        records = []
        for x in comp:
            rec = {"S": str(x["S"]), "B": str(x["B"]), "G": str(x["G"]), "K": str(x["K"]),
                   "recipe": Text(printable(x["recipe"]))}
            for col, k in (("latency ×", "latency_x"), ("memory ×", "memory_x"),
                           ("throughput ×", "throughput_x")):
                rec[col] = noise.versus(x, k)
            records.append(rec)
        title = f"versus {printable(comp[0]['baseline'])} (× > 1: better than the baseline)"
        show(console, fitted(title, ("S", "B", "G", "K", "recipe", "latency ×", "memory ×",
                                     "throughput ×"), records, console, width=width), wide)
    for r in rows:
        if r.status != "ok":
            errors.print(Text.assemble(
                (r.status, "red"), f" {printable(r.recipe)} S={r.S} B={r.B} G={r.G} "
                f"K={r.K}: {printable(r.error)}"), highlight=False)
    console.print(f"{len(rows)} points recorded in {printable(where)} (run {run_id}); see them "
                  "with:", style="dim", markup=False, highlight=False)
    console.print(follow_up, soft_wrap=True, markup=False, highlight=False)


def render_plan(plan: list[dict], summary: str, console: Console) -> None:
    """The points of a dry run (predicted memory, whether it fits, and on a CPU a rough time),
    then `summary` below them."""
    columns = ("recipe", "S", "B", "G", "K", "dtype", "memory", "fits")
    if any("rough_s" in p for p in plan):
        columns += ("≈ time",)
    records = [{"recipe": Text(printable(p["recipe"])), "S": str(p["S"]), "B": str(p["B"]),
                "G": str(p["G"]), "K": str(p["K"]), "dtype": p["dtype"],
                "memory": fmt_bytes(p["predicted_total_bytes"]),
                "fits": "yes" if p["fits"] else Text("oom", "red"),
                "≈ time": duration(p["rough_s"]) if "rough_s" in p else ""} for p in plan]
    console.print(fitted(None, columns, records, console))
    console.print(summary, markup=False, highlight=False)


def duration(seconds: float) -> str:
    """A rough duration in the largest sensible unit: '40 s', '12 min', '3.5 h'."""
    if seconds < 1:
        return "< 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
