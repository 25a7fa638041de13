"""`fsc plot KIND`, `fsc report`, `fsc compare`: figures, a page and a comparison from the store.

matplotlib and the store are imported inside the commands, after the options are checked, so
`fsc --help` stays fast and a bad option costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fsc.cli.bounds import one_value
from fsc.cli.common import (
    ForceOpt,
    JsonOpt,
    StoreOpt,
    choices,
    err,
    output_path,
    print_json,
    print_plain,
    store_dir,
)
from fsc.cli.export import ONE_FILE
from fsc.errors import FscError, UsageError
from fsc.text import counted, named

Kind = choices("Kind", "latency", "memory", "throughput", "roofline", "loss", "niah",
               "retrieval", "ruler", "quality")
Metric = choices("Metric", "accuracy", "token_accuracy")
Format = choices("Format", "html", "md")

FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
METRIC_KINDS = ("niah", "retrieval")  # the figures --metric chooses for

RunOpt = Annotated[list[str] | None, typer.Option(
    "--run", help="Run to show: its id, the first characters of the id or of its tail "
    "(3f35e7), or latest (repeat for several; `all`: every run of the kind). Default: "
    "the latest run with the rows drawn (loss, niah, ruler, quality: of each recipe; "
    "retrieval: of each recipe and task; each training directory apart).",
    show_default=False)]
WhereOpt = Annotated[list[str] | None, typer.Option(
    "--where", help="SQL condition on the rows' view (profile, training or evaluation), e.g. "
    "\"B = 1 and recipe != 'tiny_hybrid'\" (given more than once: all must hold).",
    show_default=False)]


class PlotFailed(FscError):
    """matplotlib could not write the figure (exit 1)."""


def plot(
    kind: Annotated[Kind, typer.Argument(metavar="KIND", help="latency, memory, throughput, roofline (profile "
                                         "runs), loss (training), niah, retrieval, ruler or "
                                         "quality (eval).")],
    runs: RunOpt = None,
    where: WhereOpt = None,
    out_file: Annotated[list[Path] | None, typer.Option(
        "--out", callback=one_value("--out", None, ONE_FILE), metavar="FILE",
        help="Figure file: .png, .svg or .pdf (default: KIND.png here).",
        show_default=False)] = None,
    metric: Annotated[Metric | None, typer.Option(
        "--metric", help="niah and retrieval: accuracy (exact match, the default) or "
        "token_accuracy.", show_default=False)] = None,
    force: ForceOpt = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Draw one figure from the store.

    Each recipe keeps one colour across figures; titles name the device and the runs. The
    figure is written with matplotlib's Agg backend: no display is needed.
    """
    (out_file,) = out_file  # one value or None (see one_value)
    if metric is not None and str(kind) not in METRIC_KINDS:
        raise UsageError(f"--metric applies to {' and '.join(METRIC_KINDS)} only, not {kind}")
    metric = metric or Metric.accuracy
    path = out_file or Path(f"{kind}.png")
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise UsageError(f"--out {path}: a figure is written as .png, .svg or .pdf")
    output_path(path, "--out", force=force)
    from fsc.results import figures, select
    from fsc.results.plots import draw

    conditions = [select.condition(w) for w in where or []]  # before the store is opened
    st = _store(store)
    drawn = draw(st, str(kind), runs, conditions, str(metric))
    try:
        figures.save(drawn.figure, path)
    except (OSError, ValueError) as e:
        raise PlotFailed(f"writing {path} failed: {e}") from None
    width, height = (round(v) for v in drawn.figure.get_size_inches() * figures.DPI)
    rows = len(drawn.rows)
    if as_json:
        print_json({"kind": str(kind), "path": str(path), "runs": drawn.run_ids,
                    "picked": drawn.picked or None, "not_drawn": drawn.left_out,
                    "rows": rows, "width": width, "height": height})
        return
    left = f"; nothing drawn of {named('run', drawn.left_out)}" if drawn.left_out else ""
    err.print(f"{kind}: {counted(rows, 'row')} of {named('run', drawn.run_ids)}"
              + (f" ({drawn.picked}; choose with --run)" if drawn.picked else "") + left,
              markup=False, highlight=False, soft_wrap=True)
    print_plain(f"{path}\n")


def report(
    runs: Annotated[list[str] | None, typer.Argument(
        metavar="RUN", help="Runs: ids, the first characters of an id or of its tail "
        "(3f35e7), latest (`all`: every run with results). Default: the latest "
        "profile run, and the latest training and evaluation run of each recipe (and task).",
        show_default=False)] = None,
    out_file: Annotated[list[Path] | None, typer.Option(
        "--out", callback=one_value("--out", None, ONE_FILE), metavar="FILE",
        help="Report file (default: report.html, or report.md with --format md).",
        show_default=False)] = None,
    fmt: Annotated[Format | None, typer.Option(
        "--format", help="html (one self-contained file) or md (PNG figures in a folder "
        "beside it); default: from --out's suffix, else html.", show_default=False)] = None,
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="Recipe the others are compared with at each S (default: the "
        "all-attention one).", show_default=False)] = None,
    force: ForceOpt = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the results of runs as one page: figures, tables, provenance. An existing file
    (and, for md, its figures' folder) is replaced only with --force, as `fsc export` does."""
    (out_file,) = out_file  # one value or None (see one_value)
    fmt = fmt or (Format.md if out_file is not None and out_file.suffix.lower() == ".md"
                  else Format.html)
    path = out_file or Path(f"report.{fmt}")
    suffixes = {Format.md: (".md",), Format.html: (".html", ".htm")}[fmt]
    if path.suffix.lower() not in suffixes:
        raise UsageError(f"--out {path}: {'a Markdown' if fmt == Format.md else 'an HTML'} "
                         f"report is written as a {suffixes[0]} file")
    output_path(path, "--out", force=force)
    assets = path.with_name(path.stem + "_files")
    if fmt is Format.md and assets.exists():
        if not assets.is_dir():
            raise UsageError(f"--out {path}: {assets} (the figures' folder) is a file")
        if not force and any(assets.iterdir()):
            raise UsageError(f"--out {path}: {assets} (the figures' folder) exists; pass "
                             "--force to replace it")
    st = _store(store)
    from fsc.results import report as pages
    from fsc.results import report_render

    page = pages.compose(st, runs or [], baseline, want_png=fmt is Format.md)
    try:
        if fmt is Format.md:
            assets.mkdir(exist_ok=True)
            text = report_render.to_markdown(page, assets, assets.name)
        else:
            text = report_render.to_html(page)
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        raise PlotFailed(f"writing {path} failed: {e.strerror or e}") from None
    drawn = sum(1 for s in page.sections for f in s.figures if not f.missing)
    if as_json:
        print_json({"path": str(path), "format": str(fmt), "runs": list(page.run_ids),
                    "figures": drawn})
        return
    err.print(f"report of {counted(len(page.run_ids), 'run')}, {counted(drawn, 'figure')}",
              markup=False, highlight=False)
    print_plain(f"{path}\n")


def _store(store: Path | None):
    from fsc.store import Store

    st = Store(store_dir(store))
    st.check()
    return st


def register(app: typer.Typer) -> None:
    app.command("plot")(plot)
    app.command("report")(report)
