"""`fsc eval`'s work: the grid a request asks of a checkpoint (fsc.eval.grid), filled in from
what training recorded and checked before any model is loaded, then scored into an eval run in
this process or by an executor's workers (one group per length), each cell stored as it
arrives.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from fsc.blocks import POLICIES, block_setting
from fsc.data.ruler import RulerOptions
from fsc.data.sources import DataOptions
from fsc.errors import UsageError
from fsc.eval.export import write_tasks
from fsc.eval.grid import (
    DEFAULT_DEPTHS,
    SHARED,
    Decoding,
    EvalCell,
    EvalGrid,
    EvalSettings,
    GenSettings,
)
from fsc.eval.mauve import available as mauve_available
from fsc.eval.scorers import check_scorer
from fsc.eval.tasks import check, model_to_score, own_columns, samples_in, score, task_of
from fsc.provenance import environment
from fsc.recipe import Recipe, parse_changes
from fsc.scale import ExecutorSettings, Watch, executors, recording, work
from fsc.scale.eval_request import (
    DEFAULT_PAIRS,
    GENPPL_DEFAULTS,
    SUITE_OPTIONS,
    EvalRequest,
    checked,
    trained_text,
)
from fsc.source import (
    Source,
    checkpoint_config,
    is_checkpoint,
    load_source_recipe,
    resolve_checkpoint,
)
from fsc.store import Store
from fsc.store.connect import utcnow
from fsc.store.run_ids import resolve_run
from fsc.text import counted
from fsc.tokenizer import IdTokenizer

LENGTH_MULTIPLES = (1, 2, 4, 8, 16)  # default lengths: these times the training length
UNKNOWN_TRAIN_LENGTH = 256  # what the default lengths multiply when training recorded none
GENPPL_LENGTH = 128  # genppl: tokens per sample unless --lengths says


@dataclass
class Evaluated:
    """A scored grid: its run, the store's file, and the cells in grid order."""

    run_id: str
    store: Path
    grid: EvalGrid
    cells: list[EvalCell] = field(default_factory=list)  # scored now
    held: list[EvalCell] = field(default_factory=list)  # a resumed run's, as stored

    @property
    def before(self) -> int:
        """Cells a resumed run held already."""
        return len(self.held)

    def every_cell(self) -> list[EvalCell]:
        """The run's cells, those it held and those scored now, in grid order."""
        return sorted(self.held + self.cells, key=grid_order)


def grid_order(cell: EvalCell) -> tuple:
    """A cell's place in its grid: length, then depth or pairs."""
    return cell.length, cell.depth or 0, cell.pairs or 0


def grid_of(request: EvalRequest) -> tuple[EvalGrid, Recipe, object]:
    """(grid, recipe, tokenizer): the grid `request` asks for, with what training recorded
    filling in the mode, tokenizer, needle digits and lengths it leaves open; UsageError for
    one that cannot be scored."""
    src = Source.read(request.source)
    source, recipe = src.ref, src.recipe.changed(parse_changes(request.changes))
    trained = src.training  # what `fsc train` recorded
    request = checked(request, trained)  # the task filled in, the options it takes checked
    mode = request.mode
    if mode is None and trained.get("objective") is not None:
        mode = "ar" if trained["objective"] == "ar" else "diffusion"
    depths = request.depths or DEFAULT_DEPTHS
    pairs = request.pairs or DEFAULT_PAIRS
    one_k = request.steps[0] if request.steps and request.task != "genppl" else None
    mode, G, K = block_setting(mode, None, one_k, recipe.block_size)
    tok = src.tokenizer(request.tokenizer, need_mask=mode != "ar")
    if isinstance(tok, IdTokenizer):
        raise UsageError(f"{request.source}: no tokenizer.json beside the model, and fsc eval "
                         "reads text: give --tokenizer")
    tok_spec = request.tokenizer if request.tokenizer is not None else src.text_tokenizer()
    if tok.vocab_size > recipe.vocab_size:
        raise UsageError(f"the tokenizer has {tok.vocab_size} tokens but {recipe.name}'s "
                         f"vocab_size is {recipe.vocab_size}")
    digits = request.needle_digits or trained.get("needle_digits")  # None: the default for G
    train_len = trained.get("seq_len")
    lengths = request.lengths
    if lengths is None:
        base = train_len or UNKNOWN_TRAIN_LENGTH
        lengths = {"loss": (base,), "genppl": (GENPPL_LENGTH,)}.get(
            request.task, tuple(base * m for m in LENGTH_MULTIPLES))
    data = request.data if request.data is not None else trained_text(request, trained)
    gen = None
    if request.task == "genppl":
        filled = {k: v for k, v in GENPPL_DEFAULTS.items() if getattr(request, k) is None}
        gen = _gen_settings(replace(request, **filled), mode, recipe.block_size)
    grid = EvalGrid(source, recipe.name, recipe.recipe_hash, G, K, request.task, lengths,
                    depths, pairs,
                    EvalSettings(mode, K or 1, request.samples, request.batch, request.seed,
                                 train_len),
                    digits, data,
                    DataOptions(digits, pairs[0], request.text_field),
                    str(tok_spec) if tok_spec is not None else None, gen,
                    _suite_knobs(request, trained),
                    bos=src.starts_with_bos(None if request.tokenizer else tok),
                    changes=request.changes)
    check(grid, tok)
    return grid, recipe, tok


def export(request: EvalRequest, folder: Path) -> tuple[EvalGrid, list[str]]:
    """The prompts `request` would score written as lm-evaluation-harness tasks in `folder`
    (fsc.eval.export), with no model loaded: (the grid, the tasks' names, the group's last)."""
    grid, _, tok = grid_of(request)
    return grid, write_tasks(grid, tok, Path(folder))


def _suite_knobs(request: EvalRequest, trained: dict) -> RulerOptions:
    """The suite's knobs: those given, else those training recorded (--hops 2 trained, --hops
    2 evaluated), but a single needle for niah's single variant."""
    given = {k: getattr(request, k) for k in SUITE_OPTIONS if getattr(request, k) is not None}
    recorded = trained.get("suite") if isinstance(trained.get("suite"), dict) else {}
    knobs = {**recorded, **given}
    if knobs.get("variant", "single") == "single" and "needles" not in given:
        knobs.pop("needles", None)
    return RulerOptions(**knobs)


def _gen_settings(request: EvalRequest, mode: str, recipe_G: int) -> GenSettings:
    """genppl's decodings: every G × K × policy × threshold × temperature (diffusion), or one
    per temperature (an autoregressive checkpoint), then the baseline's; checked here."""
    kind = check_scorer(request.scorer)
    for p in request.policies:
        if p not in POLICIES:
            raise UsageError(f"--policy {p!r} is not one of {', '.join(POLICIES)}")
    for t in request.thresholds:
        if t is not None and not 0 < t <= 1:
            raise UsageError(f"--threshold {t} must be in (0, 1]")
    if request.mauve:
        mauve_available()
    decodings: list[Decoding] = []
    for temp in request.temperatures:
        if mode == "ar":
            if request.G or request.steps:
                raise UsageError("an autoregressive checkpoint decodes at G 1 with no steps: "
                                 "drop --G and --steps")
            decodings.append(Decoding("ar", 1, 0, temperature=temp, top_p=request.top_p))
            continue
        for g in request.G or (recipe_G,):
            for k in request.steps or _powers_to(g):
                block_setting("diffusion", g, k)  # K <= G, G in range: one line otherwise
                for p in request.policies:
                    for t in request.thresholds:
                        decodings.append(Decoding("diffusion", g, k, p, t, temp, request.top_p))
    if request.baseline is not None:
        base = load_source_recipe(str(resolve_checkpoint(request.baseline)))
        if base.block_size != 1:
            raise UsageError(f"--baseline {request.baseline}: a block-diffusion checkpoint "
                             f"(G = {base.block_size}); the baseline row decodes an "
                             "autoregressive one")
        for temp in request.temperatures:
            decodings.append(Decoding("ar", 1, 0, temperature=temp, top_p=request.top_p,
                                      checkpoint=str(resolve_checkpoint(request.baseline))))
    return GenSettings(tuple(decodings), request.prompt_length, request.scorer, request.ngram,
                       request.mauve, scorer_warnings(request, kind))


def scorer_warnings(request: EvalRequest, kind: str) -> tuple[str, ...]:
    """Why Gen-PPL under `request.scorer` (of `kind`, see check_scorer) flatters or judges
    nothing, a line each (docs/quality.md): the scorer is the checkpoint scored or the
    --baseline (the same weights, a training directory taken at its step), or its weights are
    seeded random ones (a recipe, or a checkpoint `fsc build --save` wrote: untrained)."""
    scorer = resolve_checkpoint(request.scorer)
    said = []
    for ref, what, whose in ((request.source, "the checkpoint it scores", "its samples are"),
                             (request.baseline, "the --baseline", "the baseline's samples are")):
        if ref is not None and resolve_checkpoint(ref).resolve() == scorer.resolve():
            said.append(f"--scorer {request.scorer} is {what} ({scorer}): {whose} scored by "
                        "their own model, which flatters them")
    config = checkpoint_config(scorer)
    if kind == "fsc" and (not is_checkpoint(scorer) or (config.get("seed") is not None
                                                        and not config.get("training")
                                                        and not config.get("imported_from"))):
        said.append(f"--scorer {request.scorer}: seeded random weights (untrained); a Gen-PPL "
                    "under it says nothing about the text")
    return tuple(said)


def _powers_to(G: int) -> tuple[int, ...]:
    """K = 1, 2, 4, ... up to G (and G itself)."""
    ks, k = [], 1
    while k < G:
        ks.append(k)
        k *= 2
    return (*ks, G)


# what tells one cell of a run from another
CELL_KEY = ("task", "variant", "length", "depth", "pairs", "mode", "G", "K", "policy",
            "threshold", "temperature", "top_p", "checkpoint")


def cell_key(cell: EvalCell) -> tuple:
    return tuple(cell.get(c) for c in CELL_KEY)


PINNED = {"source": "", "baseline": "--baseline ", "scorer": "--scorer "}  # field: its option


def step_dirs(request: EvalRequest) -> dict[str, str]:
    """The step directory each training directory of `request` (its checkpoint, --baseline,
    --scorer) names now: what a resume of its run scores with, whatever training wrote since."""
    steps = {}
    for name in PINNED:
        ref = getattr(request, name)
        if ref is not None and resolve_checkpoint(ref) != Path(ref):
            steps[name] = str(resolve_checkpoint(ref))
    return steps


def resumed(st: Store, run_id: str, device: str) -> EvalRequest:
    """The request eval run `run_id` was made of (its device may change), with the step
    directories it scored in place of training directories, if it may resume;
    fsc.errors.NothingToDo when it finished, UsageError when one of those steps is gone."""
    config = st.run_config(run_id, "eval")
    asked = config.get("request")
    if not isinstance(asked, dict):
        raise UsageError(f"run {run_id} was recorded without its request; start a new run")
    lists = {k: tuple(v) if isinstance(v, list) else v for k, v in asked.items()}
    request = replace(EvalRequest(**lists), resume=run_id, device=device)
    steps = config.get("step_dirs")
    if not isinstance(steps, dict):  # recorded before step_dirs: its checkpoint alone
        ck = config.get("checkpoint")
        steps = {"source": ck} if isinstance(ck, str) and Path(ck) != Path(request.source) else {}
    for name, step in steps.items():
        if not Path(step).is_dir():
            raise UsageError(f"run {run_id} scored {PINNED[name]}{getattr(request, name)} as "
                             f"{step}, which is gone; other weights would mix two models in "
                             "one run: start a new run")
    return replace(request, **steps)


def stored_cells(st: Store, run_id: str, grid: EvalGrid) -> list[EvalCell]:
    """The cells eval run `run_id` of `grid` holds, as stored."""
    names, rows = st.query(f"SELECT * FROM eval_cells WHERE run_id = '{run_id}'")
    task, cells = task_of(grid), []
    for row in rows:
        got = dict(zip(names, row, strict=True))
        mine = set(own_columns(got["task"], task))
        cells.append(EvalCell.from_row({k: v for k, v in got.items()
                                        if k in mine or k in SHARED}))
    return cells


def _missing(grid: EvalGrid, have: set[tuple]) -> EvalGrid:
    """The grid less what a resumed run holds: lengths whose every cell is stored (genppl:
    decodings stored at every length); a cell measured again is not stored twice."""
    if not have:
        return grid
    per_length = Counter(key[CELL_KEY.index("length")] for key in have)
    lengths = tuple(n for n in grid.lengths
                    if per_length[n] < task_of(grid).cells_per_length(grid))
    if grid.gen is None:
        return replace(grid, lengths=lengths)

    def cell_of(d: Decoding, n: int) -> EvalCell:  # the record a decoding's cell will be
        return grid.cell({"task": "genppl", "length": n, "mode": d.mode, "G": d.G, "K": d.K,
                          "policy": d.policy, "threshold": d.threshold,
                          "temperature": d.temperature, "top_p": d.top_p,
                          **({"checkpoint": d.checkpoint} if d.checkpoint else {})},
                         own_columns(grid.task, task_of(grid)))

    left = tuple(d for d in grid.gen.decodings
                 if any(cell_key(cell_of(d, n)) not in have for n in lengths))
    return replace(grid, lengths=lengths, gen=replace(grid.gen, decodings=left))


def evaluate(request: EvalRequest, settings: ExecutorSettings, st: Store, command: str,
             watch: Watch) -> Evaluated:
    """Score the grid `request` asks for into a new eval run of `st` (or the missing cells of
    the run it resumes), recorded as `command`; each cell is stored as it is scored. A stop
    signal ends the run interrupted and raises fsc.interrupts.Stopped. A new run's start is
    when its work began: the model's loading is part of its time."""
    began = utcnow()
    if request.resume is not None:  # a prefix of the id, or `latest`
        request = resumed(st, resolve_run(st, request.resume, "eval", "--resume"),
                          request.device)
    grid, recipe, tok = grid_of(request)
    for line in grid.gen.warnings if grid.gen else ():
        watch.say(f"warning: {line}")
    held = stored_cells(st, request.resume, grid) if request.resume else []
    have = {cell_key(c) for c in held}
    before, todo = len(have), _missing(grid, have)
    device = executors.run_device(request.device, settings)
    if settings.executor == "local":
        task_of(grid).fits(grid, recipe, device)
    engine = model = None
    if settings.remote:  # Ray is joined here: a cluster out of reach costs a line, not a run
        engine = executors.engine_for(settings, device.startswith("cuda"), work.evaluate,
                                      work.evaluate_to_file, watch.say,
                                      task_of(grid).cells_per_length(grid))
    else:
        model = model_to_score(grid.checkpoint, device, grid.settings.seed, grid.ar,
                               grid.changes)
    config = {"request": {k: v for k, v in asdict(request).items() if k != "resume"},
              "checkpoint": grid.checkpoint, "task": grid.task, "lengths": list(grid.lengths),
              "depths": list(grid.depths), "pairs": list(grid.pairs), "samples": request.samples,
              "mode": grid.settings.mode, "G": grid.G, "K": grid.K, "seed": request.seed,
              "data": grid.data, "train_length": grid.settings.train_len,
              **({"scorer": grid.gen.scorer, "prompt_length": grid.gen.prompt_length,
                  "cells": 1 + len(grid.gen.decodings), "warnings": list(grid.gen.warnings)}
                 if grid.gen else {}),
              "recipe": recipe.name, "recipe_hash": recipe.recipe_hash,
              "step_dirs": step_dirs(request)}
    with recording(st, "eval", command, config, recipes=[recipe],
                   environment=environment(device), resume=request.resume,
                   before=before, started=None if request.resume else began) as run:
        run.interrupt_note = lambda name: (f"interrupted ({name}) after "
                                           f"{counted(before + run.rows, 'cell')}")
        result = Evaluated(run.run_id, st.file, grid, held=held)

        def keep(cell: EvalCell) -> None:
            if cell_key(cell) in have:
                return
            have.add(cell_key(cell))
            run.add_rows("eval_cells", [cell.columns()], task_of(grid).columns)
            result.cells.append(cell)
            watch.stored(cell)

        grid = todo
        if task_of(grid).ticks:  # a bar over samples (the other tasks' cells come quickly)
            watch.started(run.run_id, samples_in(grid), 0, None)
        if engine is None:
            score(model, tok, grid, grid.lengths, device, keep, watch.advanced)
        else:
            if hasattr(engine, "folder"):
                engine.folder = executors.slurm_folder(st.dir, run.run_id)

            def arrived(cell: EvalCell) -> None:  # a worker's cell: its samples at once
                if task_of(grid).ticks:
                    watch.advanced(grid.settings.samples)
                keep(cell)

            _on_engine(engine, work.EvalJob(grid, device), arrived)
            result.cells.sort(key=grid_order)
    return result


def _on_engine(engine, job: work.EvalJob, keep) -> None:
    """One group per length, scored where the engine runs it; cells stored as they arrive. A
    length given up after its retries fails the run (the cells that came are kept)."""
    lengths = job.grid.lengths
    failed = []
    for arrival in engine.arrivals(job, [work.Group(i, (n,)) for i, n in enumerate(lengths)]):
        for row in arrival.rows:
            keep(EvalCell.from_row(row))
        if arrival.failure is not None:
            failed.append(f"length {arrival.group.points[0]}: {arrival.failure}")
    if failed:
        raise executors.ExecutorError(f"{len(failed)} of {len(lengths)} lengths failed "
                                      f"({failed[0]})")
