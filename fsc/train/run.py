"""A training run as `fsc train` makes it, for any caller.

A job is planned first, a new one (`new_job`) or one resumed from its training directory
(`resumed_job`), and everything a user can get wrong is checked before torch works. `train`
then trains it in this process: rank 0 inside a store session (a train_steps row per logged
step, the in-loop eval, the run ended as finished, interrupted or failed) and the checkpoints
it wrote registered as artifacts; the other ranks of an --nproc run (launch.py) take the same
steps on their share of each batch and write nothing.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken

from fsc.checkpoint.io import load_checkpoint
from fsc.checkpoint.registry import register_trained
from fsc.data.sources import absolute, file_digest
from fsc.errors import NothingToDo, UsageError
from fsc.eval import retrieval
from fsc.interrupts import signal_name
from fsc.loading import check_fits, free_bytes, set_threads, torch_device
from fsc.model.fla_scan import train_backend
from fsc.model.lm import build_model
from fsc.paths import held, output_dir
from fsc.provenance import environment
from fsc.recipe import Recipe
from fsc.sections import MAX_NAME
from fsc.source import (
    Source,
    has_published_weights,
    is_checkpoint,
    load_source_recipe,
    resolve_checkpoint,
)
from fsc.store import Store
from fsc.text import printable
from fsc.tokenizer import carried_files, check_vocab, load_tokenizer
from fsc.train import parallel, ranks
from fsc.train.fits import check_training_fits
from fsc.train.loop import TrainConfig, Trainer, TrainResult, TrainStep
from fsc.train.state import read_state

# An adaptation anneals the block size over 1/ADAPT_ANNEAL of its steps unless told otherwise.
ADAPT_ANNEAL = 4

# A progress display of the loop: given the step it starts at, a context that yields what the
# trainer calls after every step (Trainer.on_step: step, loss, tokens per second).
Progress = Callable[[int], AbstractContextManager[Callable[[int, float, float], None] | None]]


@dataclass
class TrainJob:
    """A checked run, ready to train: its config, the recipe it trains (at G = 1 for ar), where
    its weights start (a checkpoint, or the recipe's seeded initial ones), the training state
    of a resumed run, its tokenizer and its data; and what a user should know before it
    trains (a line each)."""
    cfg: TrainConfig
    recipe: Recipe
    weights: str
    state: tuple[dict, dict[str, torch.Tensor]] | None
    tokenizer: Any
    data: Any
    notes: tuple[str, ...] = ()


def _data_changed(cfg: TrainConfig, done: int) -> tuple[str, ...]:
    """A note when the text file the run reads is not the one it read up to step `done` (its
    digest then updated to the file as it is: the note is said once)."""
    now = file_digest(cfg.data) if cfg.data_digest is not None else None
    if now is None or now == cfg.data_digest:
        return ()
    size_was, size = (int(d.split(":")[0]) for d in (cfg.data_digest, now))
    how = f"{size_was} → {size} bytes" if size != size_was else "same size, other bytes"
    cfg.data_digest = now  # (the file read once)
    return (f"note: --data {cfg.data} has changed since the run read it up to step {done} "
            f"({how}): it goes on with the file as it is now, so it is not the run an "
            "uninterrupted one would have been",)


def new_job(source: str, objective: str | None, warmup: int | None, G: int | None = None,
            logit_shift: bool | None = None, anneal: int | None = None,
            **settings: Any) -> TrainJob:
    """A new run of `source` (a recipe, or a checkpoint to start from); `settings` are the
    other TrainConfig fields. The objective is blocks for an adaptation, frontier when G > 1,
    else ar, unless given (ar trains the recipe at G = 1); the warmup a tenth of the steps, at
    most 100, unless given.
    `G` trains at that block size: an autoregressive checkpoint adapted into a denoiser
    (see `adapted`), with `logit_shift` set as given (None: the recipe's own) and the block
    size annealed over `anneal` steps (None: a quarter of the steps for an adaptation, the
    default docs/benchmarks.md §15 chose; else none). The training directory (`out`) must not
    hold anything yet. `weighting` (None: elbo) weights a denoiser's masked positions; given
    for an autoregressive run, it is refused."""
    if warmup is not None and warmup > settings["steps"]:
        raise UsageError(f"--warmup {warmup} is longer than --train-steps {settings['steps']}: "
                         "the learning rate would never reach --lr")
    source = str(resolve_checkpoint(source))  # a training directory: its newest checkpoint
    _refuse_published_weights(source)
    src = Source.read(source)
    recipe, origin = src.recipe, None
    if logit_shift is not None and G is None:
        raise UsageError("--logit-shift / --no-logit-shift go with --G N (adapting a model to "
                         "block size N); a recipe sets logit_shift in its YAML")
    if G is not None:
        recipe, origin = adapted(source, recipe, G, objective, logit_shift)
    if settings.get("tokenizer") is None and is_checkpoint(source):
        settings["tokenizer"] = own_tokenizer(source)
    elif settings.get("tokenizer") is not None:  # kept absolute: the run resumes from anywhere
        given = Path(settings["tokenizer"]).expanduser()
        if not given.exists():
            raise UsageError(f"--tokenizer {settings['tokenizer']}: no such file or directory "
                             "(a local Hugging Face tokenizer directory)")
        settings["tokenizer"] = str(given.resolve())
    settings["data"] = absolute(settings["data"])
    # an adaptation defaults to blocks (docs/training.md: every block supervised, 12-16 times
    # frontier's positions a second on text); a run from scratch keeps frontier, every
    # stored run's objective
    goal = objective or ("blocks" if origin is not None else
                         "frontier" if recipe.block_size > 1 else "ar")
    if goal == "ar" and recipe.block_size > 1:
        recipe = recipe.as_autoregressive()
    if goal == "ar" and settings.get("weighting") is not None:
        raise UsageError(f"--weighting {settings['weighting']}: an autoregressive run trains the "
                         "next-token loss, with no masked positions to weight; drop it")
    settings["weighting"] = None if goal == "ar" else settings.get("weighting") or "elbo"
    if ranks.rank_from_env() == 0:  # the launcher and rank 0 check; the others write nothing
        out = Path(settings["out"])
        output_dir(out, f"--out {out}",
                   hint="; continue a run with --resume DIR, or pick a new --out")
    if anneal is None:
        anneal = settings["steps"] // ADAPT_ANNEAL if origin is not None else 0
    cfg = TrainConfig(source=source, objective=goal, recipe_yaml=recipe.to_yaml(),
                      warmup=min(100, settings["steps"] // 10) if warmup is None else warmup,
                      adapted_from=origin, anneal=anneal, **settings,
                      data_digest=file_digest(settings["data"]),
                      started_from=(started_from(source)
                                    if origin is None and is_checkpoint(source) else None))
    notes = ()
    if src.is_checkpoint and src.starts_with_bos():
        notes = (f"note: {source} begins its text with BOS; training sequences begin without "
                 "it, so the steps saved here decode without BOS (docs/training.md, One BOS "
                 "convention)",)
    return replace(_checked(cfg, recipe, source, None), notes=notes)


def _refuse_published_weights(source: str) -> None:
    """UsageError for a published model's folder that holds its weights: fsc train reads a
    folder as a recipe (seeded weights, fsc's bytes), which would silently drop the weights
    and the tokenizer that `fsc decode` and `fsc verify` read from it. Its checkpoint
    (`fsc import`) starts from them; its recipe alone (`--recipe-only`) trains from scratch."""
    if has_published_weights(source):
        raise UsageError(f"{source}: a published model with its weights; fsc train starts from "
                         "a checkpoint's weights: import it first (fsc import "
                         f"{source} --out CKPT, then fsc train CKPT ...), or train its recipe "
                         f"from seeded weights (fsc import {source} --recipe-only --out "
                         "RECIPE.yaml)")


def own_tokenizer(source: str) -> str | None:
    """The tokenizer a run starting from checkpoint `source` reads its data with, the one the
    checkpoint reads text with (Source.text_tokenizer: an import's, an adapted run's with its
    mask token, a run's --tokenizer; None: fsc's bytes), by its absolute path so the run
    resumes from anywhere. UsageError for an imported model without one: its ids are the
    published tokenizer's, which fsc's bytes would read as other text."""
    src = Source.read(source)
    spec = src.text_tokenizer()
    if spec is None and src.config.get("imported_from"):
        raise UsageError(f"{source}: imported from {src.config['imported_from']} without a "
                         "tokenizer, so it reads token ids alone and cannot read training data; "
                         "give the published model's tokenizer with --tokenizer DIR")
    return None if spec is None else str(Path(spec).resolve())


def adapted(source: str, recipe: Recipe, G: int, objective: str | None,
            logit_shift: bool | None = None) -> tuple[Recipe, dict | None]:
    """(the recipe at block size G, where it came from): an autoregressive checkpoint (G 1,
    trained next-token or imported) keeps its weights and becomes a block-diffusion denoiser
    at G, renamed (NAME-G8 at G 8, `adapted_name`); its embedding already has a row for the
    tokenizer's mask token, which it never saw (fsc's byte tokenizer holds one; a tokenizer
    without one is refused when the run is checked). A recipe is trained at G from its seeded
    weights, renamed as well where G is not its own (its rows and figures would read as the
    recipe at its own G)."""
    if objective == "ar":
        raise UsageError(f"--G {G} trains a block-diffusion denoiser; --objective ar trains at "
                         "G 1 (give --objective blocks or frontier)")
    shift = recipe.logit_shift if logit_shift is None else logit_shift
    at_G = recipe.model_copy(update={"block_size": G, "logit_shift": shift})
    if not is_checkpoint(source):
        renamed = recipe.block_size != G
        return (at_G.model_copy(update={"name": adapted_name(recipe.name, G)}) if renamed
                else at_G), None
    if recipe.block_size not in (1, G):
        raise UsageError(f"{source} is already a block-diffusion checkpoint at G = "
                         f"{recipe.block_size}; --G adapts an autoregressive one (G 1), and a "
                         "cache built for one G is valid only for it")
    if recipe.block_size == G:
        if shift != recipe.logit_shift:
            raise UsageError(f"{source} is already a denoiser at G = {G} "
                             f"{'with' if recipe.logit_shift else 'without'} the logit shift; "
                             "the shift changes what its logits mean")
        return recipe, None
    origin = {"checkpoint": str(Path(source).resolve()), "recipe": recipe.name, "recipe_hash": recipe.recipe_hash,
              "G": recipe.block_size}
    published = Source.read(source).config.get("imported_from")
    if published:  # the card of a pushed copy names the published model, not a local path alone
        origin["imported_from"] = published
    return at_G.model_copy(update={"name": adapted_name(recipe.name, G)}), origin


def started_from(source: str) -> dict:
    """What a run starting from checkpoint `source` records of it (its card says it): the
    checkpoint by its absolute path, its recipe hash, the steps and data it was trained on,
    the published model it was imported from."""
    src = Source.read(source)
    was = src.config.get("training") if isinstance(src.config.get("training"), dict) else {}
    return {"checkpoint": str(Path(source).resolve()), "recipe_hash": src.recipe.recipe_hash,
            **{k: was[k] for k in ("steps", "data") if was.get(k) is not None},
            **({"imported_from": src.config["imported_from"]}
               if src.config.get("imported_from") else {})}


def adapted_name(name: str, G: int) -> str:
    """The adapted recipe's name, NAME-G8, so that tables tell the denoiser from the
    autoregressive model it came from (a scorer, a baseline), within the names' length."""
    suffix = f"-G{G}"
    return name[:MAX_NAME - len(suffix)] + suffix


def resumed_job(path: Path, device: str, steps: int | None, nproc: int | None,
                changes: dict[str, Any]) -> TrainJob:
    """The run of a training directory (its newest checkpoint) or of one step checkpoint, with
    its stored settings, on `device`: `steps` may extend it, `changes` (TrainConfig fields a
    resumed run may change, such as save_every or stop_at) replace the stored ones, and
    `nproc`, when given, must be the run's own (its global batch)."""
    if not Path(path).exists():
        raise UsageError(f"--resume {path}: no such directory (a training directory, the --out "
                         "of fsc train, or one of its step-NNNNNN checkpoints)")
    run_dir = Path(path).parent if Path(path).name.startswith("step-") else Path(path)
    # (before it has saved a step, it holds none); asked by the command, not by the ranks it
    # launched, whose first may hold the directory already
    if not ranks.launched() and run_dir.is_dir() and held(run_dir):
        raise UsageError(f"--resume {path}: another fsc train is training into it now; wait "
                         "for it to end (fsc runs lists it)")
    start = resolve_checkpoint(path, resume=True)
    _refuse_no_step(path, start)
    state = read_state(start)
    done = state[0]["step"]
    if Path(path).resolve() == start.resolve():  # a step named, not its training directory
        _check_newest(start, done)
    cfg = TrainConfig(**state[0]["config"])
    notes = _data_changed(cfg, done)
    run = _run_of(start)
    cfg.out = str(run)
    cfg.device = device
    if cfg.tokenizer is not None and not Path(cfg.tokenizer).exists():
        # moved: an adaptation's tokenizer/ with its training directory; any other, as every
        # step checkpoint carries a copy of the run's tokenizer, the copy
        moved = run / "tokenizer"
        cfg.tokenizer = (str(moved.resolve()) if cfg.mask_added is not None and moved.is_dir()
                         else own_tokenizer(str(start)))
    # a run --stop-at ended is done, as a finished one is, unless asked again with new targets
    if (state[0].get("reached") and steps in (None, cfg.steps)
            and changes.get("stop_at", cfg.stop_at) == cfg.stop_at):
        raise NothingToDo(f"{start} ended at step {done}, where the in-loop exact match "
                          f"reached --stop-at {cfg.stop_at:g}: the run is done, nothing to do "
                          "(another --stop-at, or --train-steps N, goes further)",
                          checkpoint=str(start), step=done)
    if steps is not None:
        if steps < done:
            raise UsageError(f"--train-steps {steps} is below the {done} steps {start} has "
                             "done")
        if done < steps < cfg.warmup:  # (at `done` already, there is nothing to train)
            raise UsageError(f"--train-steps {steps} is shorter than the run's warmup "
                             f"({cfg.warmup} steps): the learning rate would never reach its "
                             "peak or decay")
        cfg.steps = steps
    if done >= cfg.steps:  # idempotent: a retry or a requeued job finds the run done
        raise NothingToDo(f"{start} is at step {done} of {cfg.steps}: the run is done, nothing "
                          "to do (--train-steps N goes further)", checkpoint=str(start),
                          step=done)
    for key, value in changes.items():
        setattr(cfg, key, value)
    if nproc is not None and nproc != cfg.nproc:
        raise UsageError(f"--nproc {nproc}: the run trains with {cfg.nproc} process(es) "
                         "(its global batch); resume it with the same")
    recipe = load_source_recipe(start)  # the recipe trained (G = 1 for ar)
    return replace(_checked(cfg, recipe, str(start), state), notes=notes)


def _refuse_no_step(path: Path, start: Path) -> None:
    """UsageError for a --resume that names no step checkpoint: one of a checkpoint's files
    (its directory resumes, as other commands say), or a directory with none saved in it."""
    given = printable(str(path), 120)
    if start.is_file() and is_checkpoint(start.parent):
        raise UsageError(f"--resume {given}: a file in the checkpoint "
                         f"{printable(str(start.parent), 120)}; give that directory instead")
    if start.is_dir() and not is_checkpoint(start):
        raise UsageError(f"--resume {given}: no checkpoint saved in it (no step-NNNNNN), so "
                         "nothing to go on from; a run killed before its first save trains "
                         f"again from the start (fsc train RECIPE ... --out {given})")


def later_steps(folder: Path, done: int) -> list[str]:
    """The step-NNNNNN directories of training directory `folder` past step `done`, in order."""
    return sorted(d.name for d in folder.glob("step-*") if d.is_dir()
                  and d.name.removeprefix("step-").isdigit()
                  and int(d.name.removeprefix("step-")) > done)


def _run_of(step: Path) -> Path:
    """The training directory of a step checkpoint (`--resume .` inside a step: not '.')."""
    return step.resolve().parent


def _check_newest(start: Path, done: int) -> None:
    """UsageError when a step checkpoint named for --resume has later steps beside it: the run
    resumed from it would train other weights under those steps' names (a changed --train-steps
    re-stretches the schedule) and keep the old ones where it meets them, two runs in one
    directory. Its newest step, or a copy of it in a directory of its own, resumes."""
    run = _run_of(start)
    later = later_steps(run, done)
    if later:
        shown = ", ".join(later[:3]) + (f" and {len(later) - 3} more" if len(later) > 3 else "")
        raise UsageError(f"--resume {start}: {run} holds later steps ({shown}), which "
                         "the resumed run would mix with its own; resume from a copy of "
                         f"{start.name} in a new directory, or remove the later steps")


def _check_dtype(dtype: str, device: str, resumed: bool = False) -> None:
    """UsageError for bf16 off CUDA (it autocasts there; the CPU trains in fp32): a resumed
    run's dtype is its own (resolved when it began), so it is told to go on on CUDA."""
    if dtype == "bf16" and not device.startswith("cuda"):
        if resumed:
            raise UsageError(f"the run trains in bf16 on CUDA (its --dtype, which a resumed run "
                             f"keeps); resume it with --device cuda, not {device}")
        raise UsageError("--dtype bf16 autocasts on CUDA; the CPU trains in fp32")


def _checked(cfg: TrainConfig, recipe: Recipe, weights: str, state) -> TrainJob:
    """The job, once what its settings ask of the recipe, the tokenizer, the memory and the
    data holds (UsageError, exit 2, otherwise)."""
    G = recipe.block_size
    for L, _ in cfg.length_mix():
        if L % G:
            raise UsageError(f"--seq-len {L} is not a multiple of the block size G = {G}")
    if cfg.anneal and (G == 1 or cfg.objective == "ar"):
        raise UsageError(f"--anneal {cfg.anneal} grows the block size of a denoiser from 1 to G; "
                         "this run trains next-token at G 1 (give --G N, or a recipe at G > 1)")
    kinds = sorted(set(recipe.layer_plan))
    for kind in cfg.freeze:
        if kind not in kinds:
            raise UsageError(f"--freeze {kind}: {recipe.name} has no {kind} layer (its mixers: "
                             f"{', '.join(kinds)})")
    if cfg.anneal > cfg.steps:
        raise UsageError(f"--anneal {cfg.anneal} is longer than --train-steps {cfg.steps}: the "
                         f"run would end before it trains at G = {G}")
    adding = cfg.adapted_from is not None and state is None and cfg.objective != "ar"
    tok = load_tokenizer(cfg.tokenizer, need_mask=cfg.objective != "ar" and not adding)
    if adding and tok.mask_id is None:
        cfg.mask_added = mask_row(tok, recipe)
        tok.mask_id = cfg.mask_added["id"]
    elif cfg.mask_added is not None:  # resuming an adaptation that added one
        tok.mask_id = cfg.mask_added["id"]
    check_vocab(tok, recipe)
    # what the device takes, checked here, before an --nproc run launches its processes
    where = torch_device(cfg.device)
    _check_dtype(cfg.dtype, where, resumed=state is not None)
    train_backend(cfg.train_backend, where)
    check_training_fits(recipe, where, cfg.seq_len, cfg.batch, cfg.nproc,
                        objective=cfg.objective)
    if cfg.eval_every > cfg.steps:
        raise UsageError(f"--eval-every {cfg.eval_every} is longer than --train-steps "
                         f"{cfg.steps}: no in-loop eval would run")
    samples = cfg.open_data(tok, G)
    if cfg.stop_at is not None and not (cfg.eval_every and samples.supervises == "answer"):
        raise UsageError(f"--stop-at {cfg.stop_at:g} needs an in-loop eval: --eval-every N on "
                         "a task (passkey, mqar or copy), one of the suite or a mix of them")
    if cfg.eval_every and samples.supervises != "answer":
        raise UsageError(f"--eval-every {cfg.eval_every}: the in-loop eval decodes held-out "
                         "samples of a task (passkey, mqar, copy, the suite's tasks or a mix of "
                         f"them); --data {cfg.data} is text (score it with fsc eval --task loss)")
    if cfg.state_passing and cfg.objective == "frontier":
        raise UsageError("--state-passing needs --objective blocks or ar (a forward over the "
                         "clean sequence, whose end state the next step starts from)")
    return TrainJob(cfg, recipe, weights, state, tok, samples)


@dataclass
class Trained:
    """What one invocation of a run trained: the loop's result and the step it began at; on
    rank 0 also its run in the store and the in-loop evals (step, exact match)."""
    job: TrainJob
    result: TrainResult
    start_step: int
    store: Store | None = None  # None on the other ranks: only rank 0 writes the store
    run_id: str | None = None
    evals: list[dict] = field(default_factory=list)

    @property
    def losses(self) -> list[float]:
        """The losses of the steps this invocation took."""
        return self.result.losses[self.start_step:]

    @property
    def stopped(self) -> str | None:
        """How a stop signal ended it ('interrupted at step 40 by SIGTERM'); None if none did."""
        res = self.result
        return (f"interrupted at step {res.step} by {signal_name(res.stop_signal)}"
                if res.interrupted else None)

    def summary(self) -> dict:
        """What `fsc train --json` prints; `trained` false for a run stopped before its first
        step, whose checkpoint (step-000000, for --resume) holds the weights it started from."""
        cfg, res, done = self.job.cfg, self.result, self.losses
        return {"run_id": self.run_id, "store": str(self.store.file) if self.store else None,
                "recipe": self.job.recipe.name, "objective": cfg.objective, "data": cfg.data,
                "adapted_from": cfg.adapted_from, "anneal": cfg.anneal,
                "step": res.step, "steps": cfg.steps, "first_loss": done[0] if done else None,
                "final_loss": res.final_loss if done else None, "seconds": res.seconds,
                "tokens_per_s": (res.tokens / res.step_seconds if res.step_seconds > 0
                                 else None),
                "checkpoint": res.checkpoint, "trained": res.step > 0,
                "interrupted": res.interrupted,
                "stop_at": cfg.stop_at, "reached": res.reached, "evals": self.evals}


def train(job: TrainJob, device: str, store: Store, command: str, *,
          stop_after: int | None = None, progress: Progress | None = None,
          on_eval: Callable[[TrainStep], None] | None = None) -> Trained:
    """Train `job` on `device` (a torch device string) to its steps, or `stop_after` more;
    rank 0 records it in `store` as a run of kind 'train' started by `command`. `progress`
    shows the loop (rank 0), `on_eval` is told each step with an in-loop eval. A stop signal
    ends the run after the step under way, saved (`result.interrupted`)."""
    set_threads()
    job.cfg.device = device
    rank, size = parallel.setup(device)
    try:
        if size != job.cfg.nproc:
            raise UsageError(f"--nproc {job.cfg.nproc}, but {size} processes were launched")
        return _train(job, rank, store, command, stop_after, progress, on_eval)
    finally:
        parallel.close()


@contextmanager
def sole_trainer(job: TrainJob) -> Iterator[None]:
    """Hold the training directory for this process alone while it trains (an advisory lock
    on the directory, let go when the process ends, a kill included): a second fsc train into
    it (a resume started twice, a scheduler's requeue while the first still runs) is refused
    in one line before it loads a weight, where it would train the same steps and overwrite the
    first one's checkpoints. Then what the job read of the directory must still hold: a run
    that ended in between moved its newest step on."""
    out = Path(job.cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{out}: another fsc train is training into it now; wait for it to "
                             "end (fsc runs lists it), or train into another --out") from None
        done = job.state[0]["step"] if job.state is not None else -1
        later = later_steps(out, done)
        if later:
            raise UsageError(f"{out}: another fsc train saved {later[-1]} after this command "
                             "read the directory; run it again")
        yield
    finally:
        os.close(fd)  # lets the lock go


def _train(job: TrainJob, rank: int, store: Store, command: str, stop_after: int | None,
           progress: Progress | None, on_eval: Callable[[TrainStep], None] | None) -> Trained:
    """`train` in the process of `rank`; rank 0 holds the training directory once the
    checks pass."""
    cfg, recipe = job.cfg, job.recipe
    if rank == 0:
        store.check(write=True)  # one that cannot be written: said before any step
    if cfg.dtype == "auto":
        cfg.dtype = "bf16" if cfg.device.startswith("cuda") else "fp32"
    _check_dtype(cfg.dtype, cfg.device)
    check_fits(recipe.with_dtype("fp32"), cfg.device, S=cfg.seq_len, B=cfg.batch,
               G=recipe.block_size)
    check_training_fits(recipe, cfg.device, cfg.seq_len, cfg.batch, cfg.nproc,
                        free_bytes(cfg.device), cfg.objective)
    if rank != 0:
        trainer = Trainer(cfg, recipe, _model(job), job.tokenizer, state=job.state,
                          data=job.data)
        start = trainer.step
        return Trained(job, trainer.run(stop_after), start)
    with sole_trainer(job):
        if cfg.mask_added is not None and job.state is None:
            with_mask_token(job, Path(cfg.out))
        trainer = Trainer(cfg, recipe, _model(job), job.tokenizer, state=job.state,
                          data=job.data)
        return _lead(job, trainer, store, command, stop_after, progress, on_eval)


MASK_TOKEN = "<|mdm_mask|>"  # one of fsc.tokenizer.MASK_NAMES, so the tokenizer finds it again


def mask_row(tok, recipe: Recipe) -> dict:
    """Where an adapted model's mask token goes when its tokenizer has none: the first row of
    the embedding past the tokenizer's vocabulary (published vocabularies are padded, so the
    row is there, never trained). UsageError when the vocabulary is full."""
    if tok.vocab_size >= recipe.vocab_size:
        raise UsageError(f"the tokenizer ({tok.name}) has no mask token and its "
                         f"{tok.vocab_size} tokens fill {recipe.name}'s vocab_size "
                         f"{recipe.vocab_size}: no row for one (give a --tokenizer that has one)")
    return {"token": MASK_TOKEN, "id": tok.vocab_size}


def with_mask_token(job: TrainJob, out: Path) -> None:
    """An adaptation that adds a mask token: the tokenizer with it, written into the training
    directory (`tokenizer/`) beside the model's generation_config.json (its EOS ids), becomes
    the run's tokenizer."""
    added = job.cfg.mask_added
    folder = out / "tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    source = Path(job.cfg.tokenizer)
    for file in carried_files(source):  # the tokenizer's files, the model's generation config
        if file.name != "tokenizer.json":
            shutil.copyfile(file, folder / file.name)
    tok = job.tokenizer.tok
    tok.add_special_tokens([AddedToken(added["token"], special=True)])
    if tok.token_to_id(added["token"]) != added["id"]:
        raise UsageError(f"{source}: the mask token would get id "
                         f"{tok.token_to_id(added['token'])}, not {added['id']} (its ids have "
                         "gaps); give a --tokenizer that has a mask token")
    tok.save(str(folder / "tokenizer.json"))
    job.cfg.tokenizer = str(folder.resolve())


def _model(job: TrainJob):
    """fp32 master weights on the device: a checkpoint's (resuming, or starting from one) or
    the recipe's seeded initial ones."""
    cfg = job.cfg
    if job.state is not None or is_checkpoint(job.weights):
        _, model = load_checkpoint(job.weights, device=cfg.device, dtype=torch.float32)
        model.recipe = job.recipe  # ar training of a G > 1 checkpoint: the same weights at G = 1
        if job.state is None and cfg.mask_added is not None:
            with torch.no_grad():  # the new mask row starts at the mean of the vocabulary's
                emb = model.embed.weight
                emb[cfg.mask_added["id"]] = emb[: cfg.mask_added["id"]].mean(0)
        return model
    return build_model(job.recipe, device=cfg.device, seed=cfg.seed, dtype=torch.float32,
                       state_dtype=torch.float32)


def _close_dead(store: Store, out: str) -> None:
    """Close the train runs into `out` still marked running whose process is gone (a kill
    gave them no chance to end): the resume continues their work."""
    if not store.exists():
        return
    here = Path(out).resolve()
    for r in store.runs(limit=10_000, kind="train", status="dead"):
        recorded = store.run_config(r["run_id"], "train").get("out")
        if isinstance(recorded, str) and Path(recorded).resolve() == here:
            store.close_run(r["run_id"])


def _lead(job: TrainJob, trainer: Trainer, store: Store, command: str, stop_after: int | None,
          progress: Progress | None, on_eval: Callable[[TrainStep], None] | None) -> Trained:
    """Rank 0's part: the loop inside the run's store session, then the checkpoints registered."""
    cfg, recipe = job.cfg, job.recipe
    start = trainer.step
    # the training directory whole: a resume from another working directory names the same
    # training (fsc.results.select draws one curve of it, and tells two trainings apart by it)
    config = {**asdict(cfg), "out": str(Path(cfg.out).resolve()), "recipe": recipe.name,
              "recipe_hash": recipe.recipe_hash,
              "resumed_from_step": start if job.state is not None else None}
    if job.state is not None:
        _close_dead(store, cfg.out)
    with store.run("train", command, config, recipes=[recipe],
                   environment=environment(cfg.device)) as run:
        run.interrupt_note = (  # a second Ctrl-C: the step under way is lost
            lambda name: f"interrupted in step {trainer.step + 1} by {name}, not saved")
        evals: list[dict] = []

        def log(step: TrainStep) -> None:
            run.add_rows("train_steps", [step.row()])
            if step.eval_accuracy is not None:
                evals.append({"step": step.step, "accuracy": step.eval_accuracy})
                if on_eval is not None:
                    on_eval(step)

        trainer.on_log = log
        if job.data.supervises == "answer":
            trainer.evaluate = retrieval.quick_eval
        with progress(start) if progress is not None else nullcontext() as on_step:
            trainer.on_step = on_step
            res = trainer.run(stop_after)
        trained = Trained(job, res, start, store, run.run_id, evals)
        run.end("interrupted" if res.interrupted else "finished", trained.stopped)
    # fsc artifacts lists them: every step on disk it does not know yet, an earlier session's
    # too (a kill -9 gave that one no chance to register its saves)
    register_trained(store.dir, cfg.out, recipe.recipe_hash)
    return trained
