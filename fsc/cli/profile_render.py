"""What `fsc profile` prints: the sweep's progress, the results fitted to the terminal, each
recipe against a baseline, and the points of a dry run. Recipe names and error text go to rich
as plain Text (never as markup) after `printable`, so a name like "[/bold]" or an ANSI escape
prints as itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import Progress
from rich.text import Text

from fsc import noise
from fsc.cli import progress
from fsc.cli.common import err, fmt_bytes, printable
from fsc.cli.tables import fitted, show
from fsc.sweep_results import VERSUS_KEY, PointResult, baseline_notes, compare
from fsc.text import counted

if TYPE_CHECKING:
    from fsc.scale.profiling import DryRun

class SweepBar:
    """The sweep's progress bar on stderr, from the moment its run is recorded (`start`,
    after a notice when the points left would take over `notice_s` on a CPU) to the end of
    the block."""

    def __init__(self, notice_s: float):
        self.notice_s = notice_s
        self.bar: Progress | None = None

    def __enter__(self) -> SweepBar:
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    def start(self, run_id: str, total: int, done: int, rough_s: float | None) -> None:
        if rough_s is not None and rough_s > self.notice_s:
            err.print(f"{counted(total - done, 'point')}, roughly {duration(rough_s)} on this CPU (large "
                      "recipes are slow here); --dry-run lists them, Ctrl-C stops and --resume "
                      "continues", markup=False, highlight=False)
        self.bar = progress.bar(err, transient=False, remaining=False)
        self.bar.start()
        self.bar.add_task(f"profile {run_id}", total=total, completed=done)

    def advance(self, row: PointResult) -> None:
        status = f"{row.step_ms:.2f} ms/step" if row.status == "ok" else row.status
        self.bar.update(self.bar.task_ids[0], advance=1, description=(
            f"{printable(row.recipe, 60)} S={row.S} B={row.B}: {status}"))

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
        "tok/s": _tokens_per_s(r.tokens_per_s),
        "peak": fmt_bytes(r.peak_bytes),
        "GB/s": _gbps(r.achieved_gbps) if r.achieved_gbps else "-",
        "floor ms": _ms(r.floor_ms) if r.floor_ms else "-",
        "roofline": _percent(r.roofline_fraction) if r.roofline_fraction else "-",
    }


def _ms(x: float) -> str:
    """A floor time to the microsecond, or with three figures where that would print 0.000
    (a tiny recipe's floor on a GPU is a fraction of a microsecond)."""
    return f"{x:.3f}" if x >= 0.01 else f"{x:.3g}"


def _percent(fraction: float) -> str:
    """A fraction of the roofline as a whole percentage, or with two figures below 1 %,
    never 0 %."""
    pct = 100 * fraction
    return f"{pct:.0f}%" if pct >= 1 else f"{pct:.2g}%"


def _tokens_per_s(x: float) -> str:
    """Tokens/s to the unit from 10 up (1593), with two figures below (a 3B recipe's 0.023 on a
    CPU), never 0."""
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def _gbps(x: float) -> str:
    """GB/s with its first figures: 3352.1, 12.5, 0.047 (a CPU's tiny steps), never 0.0."""
    return f"{x:.1f}" if x >= 1 else f"{x:.2g}"


def _drop_order(cells: list[dict]) -> tuple[str, ...]:
    """DROP_FIRST, after the columns no row has a figure in (on a CPU: floor ms, roofline), so
    that a narrow terminal loses those before any that holds one."""
    empty = tuple(c for c in DROP_FIRST
                  if all(str(row.get(c, "")) in ("", "-") for row in cells))
    return empty + tuple(c for c in DROP_FIRST if c not in empty)


def render_rows(rows: list[PointResult], run_id: str, where: str, follow_up: str, console: Console,
                errors: Console, wide: bool = False, comparison: list[dict] | None = None,
                debug: bool = False, measured_now: int | None = None) -> None:
    """The results of a sweep, each recipe against the baseline (`comparison`, default
    fsc.sweep_results.compare of the rows), failed points on `errors` (with `debug`, each
    followed by its traceback, where this process has it), and the query that shows the run
    (on a line of its own, never wrapped, to copy). `measured_now`: of the rows, those this
    invocation measured, where it resumed a run that held the others."""
    setting = ", ".join(sorted({f"{r.dtype} on {r.device}" for r in rows}))
    width = None if wide else -1
    cells = [_cells(r) for r in rows]
    show(console, fitted(f"profile {run_id}: {setting}", RESULT_COLUMNS, cells, console,
                         _drop_order(cells), width=width), wide)
    if any(noise.noisy(r) for r in rows if r.status == "ok"):
        console.print(noise.LEGEND, style="yellow", markup=False, highlight=False)
    ran = sorted({f"{k}:{v}" for r in rows for k, v in (r.mixer_backends or {}).items()})
    if ran:
        console.print(f"kernels ran: {', '.join(ran)}", style="dim", markup=False, highlight=False)
    comp = compare(rows) if comparison is None else comparison
    if comp:
        _render_versus(comp, console, width, wide)
    for r in rows:
        if r.status != "ok":
            errors.print(Text.assemble(
                (r.status, "red"), f" {printable(r.recipe)} S={r.S} B={r.B} G={r.G} "
                f"K={r.K}: {printable(r.error)}"), highlight=False, soft_wrap=True)  # one line
            if debug and r.traceback:
                errors.print(r.traceback.rstrip(), markup=False, highlight=False, soft_wrap=True)
    stored = (f"{counted(len(rows), 'point')} recorded in {printable(where)} (run {run_id})"
              if measured_now is None else f"{counted(measured_now, 'point')} measured now; run "
              f"{run_id} holds {len(rows)} in {printable(where)}")
    console.print(f"{stored}; see them with:", style="dim", markup=False, highlight=False)
    console.print(follow_up, soft_wrap=True, markup=False, highlight=False)


def _render_versus(comp: list[dict], console: Console, width: int | None, wide: bool) -> None:
    """Each recipe against the baseline at each point; where the baseline did not fit at B,
    against its largest batch that did (a 'baseline B' column), said in the title and below."""
    base = printable(comp[0]["baseline"])
    smaller = any(x["baseline_B"] not in (None, x["B"]) for x in comp)
    records = []
    for x in comp:
        rec = {"S": str(x["S"]), "B": str(x["B"]), "G": str(x["G"]), "K": str(x["K"]),
               "recipe": Text(printable(x["recipe"])),
               "baseline B": "–" if x["baseline_B"] is None else str(x["baseline_B"])}
        for col, k in (("latency ×", "latency_x"), ("memory ×", "memory_x"),
                       ("throughput ×", "throughput_x")):
            rec[col] = noise.versus(x, k)
        records.append(rec)
    title = f"versus {base} (× > 1: better than the baseline" + (
        f"; where {base} is oom at B, against its largest batch that fits)" if smaller else ")")
    columns = ("S", "B", "G", "K", "recipe", *(("baseline B",) if smaller else ()), "latency ×",
               "memory ×", "throughput ×")
    show(console, fitted(title, columns, records, console, width=width), wide)
    console.print(VERSUS_KEY, style="dim", markup=False, highlight=False)  # wrapped to fit
    for note in baseline_notes(comp):
        console.print(note, soft_wrap=True, markup=False, highlight=False)


def render_dry_run(dry: DryRun, console: Console) -> None:
    """The points of a dry run (predicted memory, whether it fits, and on a CPU a rough time),
    then what they add up to."""
    columns = ("recipe", "S", "B", "G", "K", "dtype", "memory", "fits")
    if any("rough_s" in p for p in dry.points):
        columns += ("≈ time",)
    records = [{"recipe": Text(printable(p["recipe"])), "S": str(p["S"]), "B": str(p["B"]),
                "G": str(p["G"]), "K": str(p["K"]), "dtype": p["dtype"],
                "memory": fmt_bytes(p["predicted_total_bytes"]),
                "fits": "yes" if p["fits"] else Text("oom", "red"),
                "≈ time": duration(p["rough_s"]) if "rough_s" in p else ""} for p in dry.points]
    console.print(fitted(None, columns, records, console))
    skipped = f", {dry.stored} already stored" if dry.stored else ""
    about = f", roughly {duration(dry.rough_s)} on this CPU" if dry.rough_s is not None else ""
    console.print(f"dry run: {counted(len(dry.points), 'point')} on {dry.device}{skipped}"
                  f"{about}; nothing is measured or recorded", markup=False, highlight=False)


def duration(seconds: float) -> str:
    """A rough duration in the largest sensible unit: '40 s', '12 min', '3.5 h'."""
    if seconds < 1:
        return "< 1 s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
