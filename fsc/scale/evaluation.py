"""`fsc eval`'s work: the grid a request asks of a checkpoint (fsc.train.grid), filled in from
what training recorded and checked before any model is loaded, then scored into an eval run in
this process or by an executor's workers (one group per length), each cell stored as it
arrives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fsc.blocks import block_setting
from fsc.errors import UsageError
from fsc.loading import check_fits
from fsc.provenance import environment
from fsc.recipe import Recipe
from fsc.scale import ExecutorSettings, Watch, executors, recording, work
from fsc.source import checkpoint_config, load_source_recipe
from fsc.store import Store
from fsc.tokenizer import load_tokenizer
from fsc.train.data import DataOptions
from fsc.train.evaluate import model_to_score, score
from fsc.train.grid import DEFAULT_DEPTHS, EvalCell, EvalGrid, EvalSettings
from fsc.train.loop import resolve_checkpoint

LENGTH_MULTIPLES = (1, 2, 4, 8, 16)  # default lengths: these times the training length
UNKNOWN_TRAIN_LENGTH = 256  # what the default lengths multiply when training recorded none


@dataclass(frozen=True)
class EvalRequest:
    """What `fsc eval` was asked for; None: as the checkpoint was trained, or fsc's default."""

    source: str  # a checkpoint, a training directory (its latest step) or a recipe
    task: str = "niah"
    lengths: tuple[int, ...] | None = None
    depths: tuple[float, ...] = DEFAULT_DEPTHS
    pairs: tuple[int, ...] = (8,)
    samples: int = 20
    steps: int | None = None
    mode: str | None = None
    batch: int = 20
    data: str | None = None
    needle_digits: int | None = None
    text_field: str = "text"
    tokenizer: str | None = None
    seed: int = 0
    device: str = "cpu"


@dataclass
class Evaluated:
    """A scored grid: its run, the store's file, and the cells in grid order."""

    run_id: str
    store: Path
    grid: EvalGrid
    cells: list[EvalCell] = field(default_factory=list)


def grid_of(request: EvalRequest) -> tuple[EvalGrid, Recipe, object]:
    """(grid, recipe, tokenizer): the grid `request` asks for, with what training recorded
    filling in the mode, tokenizer, needle digits and lengths it leaves open; UsageError for
    one that cannot be scored."""
    source = str(resolve_checkpoint(request.source))
    recipe = load_source_recipe(source)
    trained = checkpoint_config(source).get("training")  # what `fsc train` recorded
    trained = trained if isinstance(trained, dict) else {}
    mode = request.mode
    if mode is None and trained.get("objective") is not None:
        mode = "ar" if trained["objective"] == "ar" else "diffusion"
    mode, G, K = block_setting(mode, None, request.steps, recipe.block_size)
    tok_spec = request.tokenizer if request.tokenizer is not None else trained.get("tokenizer")
    tok = load_tokenizer(tok_spec)
    if tok.vocab_size > recipe.vocab_size:
        raise UsageError(f"the tokenizer has {tok.vocab_size} tokens but {recipe.name}'s "
                         f"vocab_size is {recipe.vocab_size}")
    digits = request.needle_digits or trained.get("needle_digits")  # None: the default for G
    train_len = trained.get("seq_len")
    lengths = request.lengths
    if lengths is None:
        base = train_len or UNKNOWN_TRAIN_LENGTH
        lengths = (base,) if request.task == "loss" else tuple(base * m for m in LENGTH_MULTIPLES)
    grid = EvalGrid(source, recipe.name, recipe.recipe_hash, G, K, request.task, lengths,
                    request.depths, request.pairs,
                    EvalSettings(mode, K or 1, request.samples, request.batch, request.seed,
                                 train_len),
                    digits, request.data,
                    DataOptions(digits, request.pairs[0], request.text_field),
                    str(tok_spec) if tok_spec is not None else None)
    grid.check(tok)
    return grid, recipe, tok


def evaluate(request: EvalRequest, settings: ExecutorSettings, st: Store, command: str,
             watch: Watch) -> Evaluated:
    """Score the grid `request` asks for into a new eval run of `st`, recorded as `command`;
    each cell is stored as it is scored. A stop signal ends the run interrupted and raises
    fsc.interrupts.Stopped."""
    grid, recipe, tok = grid_of(request)
    device = executors.run_device(request.device, settings)
    if settings.executor == "local":
        for n in grid.lengths:
            check_fits(recipe, device, S=n, B=min(request.batch, request.samples), G=grid.G)
    engine = model = None
    if settings.remote:  # Ray is joined here: a cluster out of reach costs a line, not a run
        engine = executors.engine_for(settings, device.startswith("cuda"), work.evaluate,
                                      work.evaluate_to_file, watch.say, grid.cells_per_length)
    else:
        model = model_to_score(grid.checkpoint, device, grid.settings.seed, grid.ar)
    config = {"checkpoint": grid.checkpoint, "task": grid.task, "lengths": list(grid.lengths),
              "depths": list(grid.depths), "pairs": list(grid.pairs), "samples": request.samples,
              "mode": grid.settings.mode, "G": grid.G, "K": grid.K, "seed": request.seed,
              "data": grid.data, "train_length": grid.settings.train_len,
              "recipe": recipe.name, "recipe_hash": recipe.recipe_hash}
    with recording(st, "eval", command, config, recipes=[recipe],
                   environment=environment(device)) as run:
        run.interrupt_note = lambda name: f"interrupted ({name}) after {run.rows} cells"
        result = Evaluated(run.run_id, st.file, grid)

        def keep(cell: EvalCell) -> None:
            run.add_rows("eval_cells", [cell.columns()])
            result.cells.append(cell)
            watch.stored(cell)

        if engine is None:
            score(model, tok, grid, grid.lengths, device, keep)
        else:
            if hasattr(engine, "folder"):
                engine.folder = executors.slurm_folder(st.dir, run.run_id)
            _on_engine(engine, work.EvalJob(grid, device), keep)
            result.cells.sort(key=lambda c: (c.length, c.depth or 0, c.pairs or 0))
    return result


def _on_engine(engine, job: work.EvalJob, keep) -> None:
    """One group per length, scored where the engine runs it; cells stored as they arrive. A
    length given up after its retries fails the run (the cells that came are kept)."""
    lengths = job.grid.lengths
    failed = []
    for arrival in engine.arrivals(job, [work.Group(i, (n,)) for i, n in enumerate(lengths)]):
        for row in arrival.rows:
            keep(EvalCell(**row))
        if arrival.failure is not None:
            failed.append(f"length {arrival.group.points[0]}: {arrival.failure}")
    if failed:
        raise executors.ExecutorError(f"{len(failed)} of {len(lengths)} lengths failed "
                                      f"({failed[0]})")
