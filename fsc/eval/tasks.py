"""`fsc eval`'s tasks, registered by name in TASKS (see the package docstring, fsc.eval).
`fits` checks the memory a task needs before any model is loaded; `score` is the one dispatch
the driver and every worker call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from fsc.errors import UsageError
from fsc.eval import columns, genppl, loss, retrieval, ruler
from fsc.eval.grid import EvalCell, EvalGrid
from fsc.loading import check_fits, load_model, reread
from fsc.model.lm import read_as
from fsc.recipe import Recipe, parse_changes
from fsc.store.schema import Column


def fits_at_lengths(grid: EvalGrid, recipe: Recipe, device) -> None:
    """WeightsDoNotFit unless a pass of `batch` prompts at each length fits the device."""
    for n in grid.lengths:
        check_fits(recipe, device, S=n, B=min(grid.settings.batch, grid.settings.samples),
                   G=grid.G)


@dataclass(frozen=True)
class Task:
    name: str
    check: Callable  # (grid, tokenizer) -> None; UsageError for a grid it cannot score
    measure: Callable  # (model, tokenizer, grid, lengths, device) -> Iterator[dict]
    cells_per_length: Callable[[EvalGrid], int]
    fits: Callable[[EvalGrid, Recipe, str], None] = fits_at_lengths  # WeightsDoNotFit
    # measure takes tick(n) too, called as n more samples are done (a bar over samples)
    ticks: bool = False
    blocks: bool = True  # its prompts are laid out in blocks of G: each length a multiple
    # its own eval_cells columns beside EvalCell's shared ones: what measure's cells may hold
    # besides those (a store gains them as the task's first cells are written)
    columns: tuple[Column, ...] = ()


TASKS = {t.name: t for t in (
    *(Task(name, ruler.check, ruler.measure, ruler.cells_per_length,
           columns=columns.suite(name)) for name in ("niah", "vt", "cwe", "fwe", "ruler")),
    Task("mqar", retrieval.check, retrieval.mqar, lambda g: len(g.pairs),
         columns=columns.MQAR),
    Task("copy", retrieval.check, retrieval.copy, lambda g: 1, columns=columns.COPY),
    Task("loss", loss.check, loss.measure, lambda g: 1, loss.fits, blocks=False,  # checks its own
         columns=(columns.DATA, *columns.LOSS, *columns.LOSS_KNOBS)),
    Task("genppl", genppl.check, genppl.measure, lambda g: 1 + len(g.gen.decodings),
         genppl.fits, ticks=True, blocks=False, columns=columns.GENPPL),  # its cells name their G
)}


def declared_columns() -> tuple[Column, ...]:
    """Every registered task's own eval_cells columns, each once (those of the shipped tasks are
    fsc.eval.columns.ALL, which `fsc schema` describes)."""
    return tuple({c.name: c for task in TASKS.values() for c in task.columns}.values())


def task_of(grid: EvalGrid) -> Task:
    return TASKS[grid.task]


def own_columns(name: str, task: Task) -> tuple[str, ...]:
    """The own columns of a cell of task `name` that `task` measured (a part of --task ruler
    has its own part's; a task that is not registered, the measuring task's)."""
    return tuple(c.name for c in TASKS.get(name, task).columns)


def samples_in(grid: EvalGrid) -> int:
    """The samples `score` goes through for `grid`: `samples` in each of its cells."""
    return grid.settings.samples * task_of(grid).cells_per_length(grid) * len(grid.lengths)


def check(grid: EvalGrid, tokenizer) -> None:
    """UsageError, before any model is loaded, for a grid its task cannot score."""
    if grid.task not in TASKS:
        raise UsageError(f"--task {grid.task!r} is not one of {', '.join(TASKS)}")
    if TASKS[grid.task].blocks:
        for n in grid.lengths:
            if n % grid.G:
                raise UsageError(f"--lengths: {n} is not a multiple of the block size "
                                 f"G = {grid.G}")
    TASKS[grid.task].check(grid, tokenizer)


def model_to_score(source: str, device, seed: int, ar: bool, changes: tuple[str, ...] = ()):
    """The model `fsc eval` scores: a checkpoint (or a recipe's seeded weights), its weight-free
    fields changed as `fsc eval --set` asks (`changes`), decoded at G = 1 when `ar` asks it of
    a G > 1 checkpoint."""
    _, model = load_model(source, device=device, seed=seed)
    if changes:
        model = reread(model, model.recipe.changed(parse_changes(changes)))
    if ar and model.recipe.block_size != 1:
        model = read_as(model, 1, False)
    return model


def score(model, tokenizer, grid: EvalGrid, lengths, device,
          on_cell: Callable[[EvalCell], None] | None = None,
          on_samples: Callable[[int], None] | None = None) -> list[EvalCell]:
    """The cells of `grid` at `lengths`, scored by `model` in this process, each handed to
    `on_cell` as it is done; a task that ticks calls `on_samples(n)` as n more samples are."""
    cells = []
    task = TASKS[grid.task]
    ticks = {"tick": on_samples or (lambda n: None)} if task.ticks else {}
    with torch.no_grad():
        for measured in task.measure(model, tokenizer, grid, lengths, device, **ticks):
            cells.append(grid.cell(measured, own_columns(measured["task"], task)))
            if on_cell is not None:
                on_cell(cells[-1])
    return cells
