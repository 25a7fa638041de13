"""`fsc eval`: needle retrieval by length × depth, mqar by pairs × length, held-out loss. The
work itself is fsc.scale.evaluation."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from fsc.blocks import MAX_G
from fsc.cli.bounds import MAX_B, MAX_S, parse_depths, parse_sizes
from fsc.cli.common import (
    Choice,
    JsonOpt,
    Mode,
    StoreOpt,
    err,
    out,
    print_json,
    printable,
    say,
    store_dir,
    torch_threads,
)
from fsc.cli.executors import with_executor_options
from fsc.scale import ExecutorSettings
from fsc.train.tasks import MAX_KEY_DIGITS

MAX_SAMPLES = 100_000
MAX_PAIRS = 676  # mqar's keys are two letters


class Task(Choice):
    niah = "niah"
    mqar = "mqar"
    loss = "loss"


@with_executor_options
def evaluate(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(
        metavar="CKPT",
        help="Checkpoint dir or training dir (its latest step); a recipe evaluates seeded "
        "random weights.")],
    task: Annotated[Task, typer.Option("--task", help="niah, mqar or loss.")] = Task.niah,
    lengths: Annotated[str | None, typer.Option(
        "--lengths", help="Prompt lengths, e.g. 256,512,1k,2k,4k (default: 1, 2, 4, 8 and 16 "
        "times the training length; loss: the training length).", show_default=False)] = None,
    depths: Annotated[str, typer.Option(
        "--depths", help="niah: needle depths in [0, 1].")] = "0,0.25,0.5,0.75,1",
    pairs: Annotated[str, typer.Option("--pairs", help="mqar: numbers of pairs, e.g. 4,8,16.")] = "8",
    samples: Annotated[int, typer.Option("--samples", min=1, max=MAX_SAMPLES,
                                         help="Prompts per cell (loss: sequences).")] = 20,
    steps: Annotated[int | None, typer.Option(
        "--steps", min=1, max=MAX_G, help="Denoising steps K per block (default: G).",
        show_default=False)] = None,
    mode: Annotated[Mode | None, typer.Option(
        "--mode", help="diffusion or ar (default: how the checkpoint was trained; ar when G is 1).",
        show_default=False)] = None,
    batch: Annotated[int, typer.Option("--batch", min=1, max=MAX_B,
                                       help="Prompts decoded together.")] = 20,
    data: Annotated[str | None, typer.Option(
        "--data", help="loss: a .txt/.jsonl/.parquet file or a task (passkey, mqar, copy).",
        show_default=False)] = None,
    needle_digits: Annotated[int | None, typer.Option(
        "--needle-digits", min=1, max=MAX_KEY_DIGITS, help="niah: digits of the key (default: as trained, or the "
        "smallest multiple of G that is at least 4).",
        show_default=False)] = None,
    text_field: Annotated[str, typer.Option("--text-field", help="loss: the text field.")] = "text",
    tokenizer: Annotated[Path | None, typer.Option(
        "--tokenizer", help="Local Hugging Face tokenizer directory (default: as trained).",
        show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**62, help="Seed of the prompts.")] = 0,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")] = "cpu",
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    *,
    scale: ExecutorSettings,
) -> None:
    """Score a checkpoint: the answers are decoded by the cached decoder; a row per cell in the
    store (view `evaluation`), printed as a heatmap table."""
    from fsc.interrupts import Stopped
    from fsc.scale import Watch
    from fsc.scale.evaluation import EvalRequest, evaluate
    from fsc.store import Store

    asked = EvalRequest(
        source, str(task),
        lengths=tuple(parse_sizes(lengths, "--lengths", 1, MAX_S)) if lengths is not None else None,
        depths=tuple(parse_depths(depths)), pairs=tuple(parse_sizes(pairs, "--pairs", 1, MAX_PAIRS)),
        samples=samples, steps=steps, mode=mode and str(mode), batch=batch, data=data,
        needle_digits=needle_digits, text_field=text_field,
        tokenizer=str(tokenizer) if tokenizer is not None else None, seed=seed, device=device)
    torch_threads()
    st = Store(store_dir(store))
    try:
        done = evaluate(asked, scale, st, " ".join(["fsc", *sys.argv[1:]]),
                        Watch(say=say, stored=_show_cell))
    except Stopped as e:
        print(f"interrupted: {e.kept} cells of run {e.run_id} are stored", file=sys.stderr)
        raise typer.Exit(e.exit_code) from None
    if as_json:
        print_json({"run_id": done.run_id, "store": str(done.store),
                    "checkpoint": done.grid.checkpoint, "task": done.grid.task,
                    "rows": [c.columns() for c in done.cells]})
        return
    _render(done.cells, done.grid.task, done.grid.recipe, done.run_id)


def _show_cell(c) -> None:
    """A cell's line on stderr as it is stored."""
    err.print(f"  {c.task} length {c.length}"
              + (f" depth {c.depth:g}" if c.depth is not None else "")
              + (f" pairs {c.pairs}" if c.pairs is not None else "")
              + (f": {c.accuracy:.2f}" if c.accuracy is not None else ""),
              markup=False, highlight=False)


def _shade(acc: float) -> str:
    """A heatmap cell style: red at 0 through yellow to green at 1."""
    r = int(255 * min(1.0, 2 * (1 - acc)))
    g = int(255 * min(1.0, 2 * acc))
    return f"black on rgb({r},{g},60)"


def _render(cells: list, task: str, recipe: str, run_id: str) -> None:
    """The cells (fsc.train.grid.EvalCell) as a loss table, or as an accuracy heatmap by depth
    (or pairs) × length."""
    from rich.table import Table
    from rich.text import Text

    if task == "loss":
        out.print(f"{printable(recipe, 60)}: held-out loss (run {run_id})", markup=False,
                  highlight=False)
        table = Table()
        for c in ("length", "sequences", "loss (nats/token)", "± s.e."):
            table.add_column(c, justify="right")
        for c in cells:
            table.add_row(str(c.length), str(c.n), f"{c.loss:.4f}",
                          "–" if c.loss_se is None else f"{c.loss_se:.4f}")
        out.print(table)
        for c in cells:
            if (c.distinct_sequences or c.n) < c.n:
                err.print(f"length {c.length}: the data holds {c.distinct_sequences} "
                          f"distinct sequences; the {c.n} scored reuse them, so the spread "
                          "is understated (give --samples at most that, or more text)",
                          soft_wrap=True)
        return
    key = "depth" if task == "niah" else "pairs"
    lengths = sorted({c.length for c in cells})
    out.print(f"{printable(recipe, 60)}: {task} accuracy by {key} × length (run {run_id})",
              markup=False, highlight=False)
    table = Table()
    table.add_column(key, justify="right")
    for n in lengths:
        ratio = next(c.length_ratio for c in cells if c.length == n)
        table.add_column(f"{n}" + (f" ({ratio:g}×)" if ratio else ""), justify="right")
    for k in sorted({getattr(c, key) for c in cells}):
        row = {c.length: c for c in cells if getattr(c, key) == k}
        table.add_row(f"{k:g}", *[
            Text(f" {row[n].accuracy:.2f} ", style=_shade(row[n].accuracy)) if n in row else "-"
            for n in lengths])
    out.print(table)


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
