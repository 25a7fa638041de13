"""`fsc train`: train a recipe (or go on from a checkpoint) with the frontier, blocks or ar objective."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fsc.blocks import MAX_G
from fsc.cli.bounds import MAX_B, one_value
from fsc.cli.common import (
    INVOKED,
    DeviceOpt,
    JsonOpt,
    StoreOpt,
    choices,
    command_line,
    err,
    finite,
    given_options,
    printable,
    renamed,
    store_dir,
    torch_device,
)
from fsc.cli.eval_options import TRAIN_KNOBS, with_task_options
from fsc.cli.train_options import (
    DATA_OPTIONS,
    RESUME_CHANGES,
    RUN_SETTINGS,
    mixer_kinds,
    one_source,
    seq_lengths,
)
from fsc.cli.train_render import aborted, eval_said, progress_bar, report
from fsc.data.tasks import MAX_KEY_DIGITS
from fsc.errors import UsageError
from fsc.train import ranks

MAX_STEPS, MAX_NPROC, MAX_MINUTES = 10**8, 1024, 10**6

Objective = choices("Objective", "frontier", "ar", "blocks")
Weighting = choices("Weighting", "elbo", "masked")
TrainDType = choices("TrainDType", "auto", "fp32", "bf16")
TrainBackend = choices("TrainBackend", "auto", "torch", "fla")


def _count(name: str, help: str, low: int = 1, high: int = MAX_STEPS, hidden: bool = False):
    return typer.Option(name, min=low, max=high, help=help, show_default=False, hidden=hidden)


@with_task_options(TRAIN_KNOBS)
def train(
    ctx: typer.Context,
    source: Annotated[str | None, typer.Argument(
        metavar="RECIPE", help="Recipe file, shipped recipe name, or a checkpoint or training "
        "dir to start from (not with --resume).", show_default=False)] = None,
    data: Annotated[list[str] | None, typer.Option(
        "--data", callback=one_source, metavar="TEXT", help="passkey, mqar, copy, the RULER-style niah_multikey, niah_multivalue, "
        "niah_multiquery, vt, cwe, fwe; ruler (all of these with passkey) or a weighted mix "
        "(passkey:2,vt:1,cwe:1); shakespeare, a .txt/.jsonl/.parquet file, or "
        "hf:NAME[:CONFIG][:SPLIT] (needs fsc[data]).", show_default=False)] = None,
    seq_len: Annotated[list[str] | None, typer.Option(
        "--seq-len", callback=seq_lengths, show_default=False, metavar="LIST",
        help="Tokens per sequence (a multiple of G), e.g. 1024 or 1k; or several lengths, "
        "each micro-batch at one drawn with its weight (128,256 or 128:3,256:1): the longest "
        "is the run's training length. Repeatable: the lists join.")] = None,
    train_steps: Annotated[int | None, _count(
        "--train-steps", "Optimizer steps in all (the schedule's length; with --resume, may "
        "extend it).")] = None,
    old_steps: Annotated[int | None, _count(
        "--steps", "The old spelling of --train-steps (--steps is K of decoding).",
        hidden=True)] = None,
    out_dir: Annotated[list[Path] | None, typer.Option(
        "--out", callback=one_value("--out", None, "a run trains into one directory"),
        help="Training directory: step-NNNNNN checkpoints and `latest`.", show_default=False)] = None,
    G: Annotated[int | None, typer.Option(
        "--G", min=2, max=MAX_G, help="Train at block size G (named NAME-G8 off its own G): "
        "an autoregressive checkpoint becomes a denoiser, weights kept (docs/training.md).",
        show_default=False)] = None,
    logit_shift: Annotated[bool | None, typer.Option(
        "--logit-shift/--no-logit-shift", help="With --G: read position j's logits from "
        "position j - 1's hidden state, as the autoregressive model did (Dream's shift; a "
        "recipe field, logit_shift). Default: the recipe's own (off).",
        show_default=False)] = None,
    anneal: Annotated[int | None, _count(
        "--anneal", "Grow the block size from 1 to G over the first N steps (1, 2, 4, ... by "
        "powers of two dividing G, an equal share each): causal to block-causal, "
        "DiffuLLaMA's annealing. Default: a quarter of --train-steps when adapting an "
        "autoregressive checkpoint (--G), else 0 (none).", low=0)] = None,
    objective: Annotated[Objective | None, typer.Option(
        "--objective", help="frontier (default when G > 1), blocks (every block a frontier in one "
        "two-stream forward; default adapting a checkpoint with --G) or ar (trains the recipe "
        "at G = 1).",
        show_default=False)] = None,
    weighting: Annotated[Weighting | None, typer.Option(
        "--weighting", help="Frontier loss: elbo (1/t, the bound) or masked (a mean over the "
        "masked positions; lower variance). Default elbo; a denoiser's only (refused for ar).",
        show_default=False)] = None,
    batch: Annotated[int, _count("--batch", "Sequences per micro-batch (default 16).",
                                 high=MAX_B)] = 16,
    accum: Annotated[int, _count("--accum", "Micro-batches per optimizer step (default 1).",
                                 high=4096)] = 1,
    lr: Annotated[float, typer.Option("--lr", callback=finite(0, 10, low_open=True),
                                      help="Peak learning rate.")] = 3e-3,
    warmup: Annotated[int | None, _count("--warmup", "Linear warmup steps (default: a tenth "
                                         "of --train-steps, at most 100).", low=0)] = None,
    weight_decay: Annotated[float, typer.Option(
        "--weight-decay", callback=finite(0, 10), help="AdamW decay of the matrices.")] = 0.1,
    grad_clip: Annotated[float, typer.Option(
        "--grad-clip", callback=finite(0, 1e6), help="Clip the gradient norm (0: off).")] = 1.0,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**62,
                                      help="Seed of the weights, the data and the masks.")] = 0,
    device: DeviceOpt = "auto",
    dtype: Annotated[TrainDType, typer.Option(
        "--dtype", help="auto: bf16 autocast on CUDA, fp32 on the CPU.")] = TrainDType.auto,
    train_backend: Annotated[TrainBackend, typer.Option("--train-backend", help="torch, fla "
        "(flash-linear-attention, CUDA; fsc[fla]) or auto (fla where it runs).")] = TrainBackend.auto,
    save_every: Annotated[int, _count("--save-every", "Save a checkpoint every N steps, "
                                      "kept for good (0: none but the others).", low=0)] = 0,
    save_minutes: Annotated[float, typer.Option(
        "--save-minutes", callback=finite(0, MAX_MINUTES),
        help="Save a rolling checkpoint after every M minutes of training, so a run killed "
        "outright loses at most M minutes (0: none).")] = 10.0,
    keep: Annotated[int, _count("--keep", "Keep the N newest rolling checkpoints (those of "
                                "--save-minutes and of a stop); older ones are deleted. Those "
                                "of --save-every and the last step stay (0: keep all; default "
                                "3).", low=0, high=10**6)] = 3,
    eval_every: Annotated[int, _count("--eval-every", "Decode held-out samples of the task "
                                      "every N steps (0: never).", low=0)] = 0,
    log_every: Annotated[int, _count("--log-every", "Store a step row every N steps (and the "
                                     "first and the last).")] = 10,
    needle_digits: Annotated[int | None, _count(
        "--needle-digits", "passkey, niah_*: digits of the key (niah: of each value; default: "
        "the smallest multiple of G that is at least 4, so the key fills its answer blocks).",
        high=MAX_KEY_DIGITS)] = None,
    supervise_needle: Annotated[bool, typer.Option(
        "--supervise-needle", help="passkey, niah_*: also train on each needle's repeat of "
        "its key; vt: on the name each link refers to (not scored).")] = False,
    freeze: Annotated[list[str] | None, typer.Option(
        "--freeze", metavar="KIND[,KIND]", help="Keep the mixers of these kinds (mamba, "
        "attention, ...) as the run starts them: from their initialisation, or from the "
        "checkpoint it starts from; every other weight trains. Repeatable: the lists join.",
        show_default=False)] = None,
    state_passing: Annotated[bool, typer.Option("--state-passing", help="Start each sequence's "
        "recurrent layers where the previous batch's same row ended (blocks or ar).")] = False,
    pairs: Annotated[int, _count("--pairs", "mqar: key-value pairs per sample.", high=676)] = 8,
    text_field: Annotated[str, typer.Option(
        "--text-field", help=".jsonl/.parquet/hf: the field holding the text.")] = "text",
    tokenizer: Annotated[Path | None, typer.Option(
        "--tokenizer", help="Local Hugging Face tokenizer directory (default: a "
        "checkpoint's own, as it reads text; bytes for a recipe).",
        show_default=False)] = None,
    resume: Annotated[Path | None, typer.Option(
        "--resume", help="Continue a training directory (or one of its step checkpoints).",
        show_default=False)] = None,
    stop_after: Annotated[int | None, _count(
        "--stop-after", "End this invocation after N more steps, saved and resumable.")] = None,
    stop_at: Annotated[float | None, typer.Option(
        "--stop-at", callback=finite(0, 1, low_open=True), metavar="ACC",
        help="End the run at the first in-loop eval (--eval-every) whose exact match reaches "
        "ACC, in (0, 1].", show_default=False)] = None,
    nproc: Annotated[int | None, _count(
        "--nproc", "Data-parallel processes on this node (torchrun): one per GPU, or N on the "
        "CPU (gloo); --batch is each one's, the global batch N × --batch. A resumed run keeps "
        "its own (default 1).", high=MAX_NPROC)] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
    *,
    suite: dict,
) -> None:
    """Train a denoiser (frontier or blocks objective) or next-token (ar); checkpoints, a
    training-state file for --resume and a row per logged step in the store.

    A rolling checkpoint is saved every 10 minutes by default (--save-minutes, --keep). Ctrl-C,
    SIGTERM, SIGUSR1 or SIGUSR2 ends the run after the step under way, saved and resumable;
    the exit status is 128 + the signal's number (130, 143, 138, 140)."""
    # the processes --nproc starts run the same command line: only the first says it
    steps = renamed(ctx, "--steps", "--train-steps", old_steps, train_steps,
                    quiet=ranks.launched())
    missing = [n for n, v in (("RECIPE", source), ("--data", data[0]), ("--seq-len", seq_len),
                              ("--train-steps", steps), ("--out", out_dir[0])) if v is None]
    if missing and resume is None:  # said before torch is imported, in a fraction of a second
        raise UsageError(f"fsc train needs {', '.join(missing)} (or --resume DIR)")
    from fsc.interrupts import StopSignals, exit_code, signum_of
    from fsc.store import Store
    from fsc.train.launch import check_gpus, launch
    from fsc.train.run import new_job, resumed_job
    from fsc.train.run import train as train_job

    nproc = nproc or (ranks.world_size() if ranks.launched() else None)
    if resume is not None:
        given = given_options(ctx, RUN_SETTINGS)
        if source is not None:
            given.insert(0, "RECIPE")
        if given:
            raise UsageError(f"--resume keeps the run's settings; drop {', '.join(given)}")
        changes = {key: getattr(ctx.params[key], "value", ctx.params[key])  # stored unless given
                   for key in RESUME_CHANGES if ctx.get_parameter_source(key).name != "DEFAULT"}
        job = resumed_job(resume, device, steps, nproc, changes)
    else:
        from fsc.data.sources import check_read

        check_read(data[0], [key for key in DATA_OPTIONS
                          if ctx.get_parameter_source(key).name != "DEFAULT"])
        job = new_job(
            source, str(objective) if objective else None, warmup, G=G, logit_shift=logit_shift,
            anneal=anneal, data=data[0], lengths=seq_len if len(seq_len) > 1 else None,
            seq_len=max(L for L, _ in seq_len),
            steps=steps, out=str(out_dir[0]), weighting=str(weighting) if weighting else None, batch=batch,
            accum=accum, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip, seed=seed,
            device=device, dtype=str(dtype), save_every=save_every, save_minutes=save_minutes,
            keep=keep, eval_every=eval_every, log_every=log_every, needle_digits=needle_digits,
            supervise_needle=supervise_needle, pairs=pairs, text_field=text_field,
            tokenizer=str(tokenizer) if tokenizer else None, nproc=nproc or 1, stop_at=stop_at,
            train_backend=str(train_backend), state_passing=state_passing, suite=suite,
            freeze=mixer_kinds(freeze))
    cfg = job.cfg
    for note in job.notes if not ranks.launched() else ():  # (said by the launcher alone)
        err.print(note, markup=False, highlight=False, soft_wrap=True)
    if cfg.nproc > 1 and not ranks.launched():
        check_gpus(cfg.nproc, device)
        err.print(f"training in {cfg.nproc} processes (torchrun); rank 0 writes the store and "
                  "the checkpoints", markup=False, highlight=False)
        code = launch(cfg.nproc, INVOKED)
        if code:
            raise typer.Exit(code)
        return
    name = printable(job.recipe.name, 40)
    # A stop signal ends training after its step (fsc.train.loop); one that comes after, while
    # the last checkpoint is recorded and the resume command said (schedulers repeat SIGTERM),
    # is absorbed too, so the command ends as the first signal asked (a second Ctrl-C aborts).
    try:
        with StopSignals(defer=True):
            trained = train_job(job, ranks.device_of(torch_device(device)),
                                Store(store_dir(store)), command_line(), stop_after=stop_after,
                                progress=lambda start: progress_bar(name, cfg.steps, start),
                                on_eval=eval_said)
            if trained.run_id is not None:  # rank 0; the other processes write nothing
                report(trained, store, as_json)
    except KeyboardInterrupt as e:  # a second Ctrl-C: out at once, the step under way unsaved
        aborted(cfg.out, store, signum_of(e))
        raise typer.Exit(exit_code(signum_of(e))) from None
    if trained.result.interrupted:
        raise typer.Exit(exit_code(trained.result.stop_signal))


def register(app: typer.Typer) -> None:
    app.command("train")(train)
