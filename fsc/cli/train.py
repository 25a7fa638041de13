"""`fsc train`: train a recipe (or go on from a checkpoint) with the frontier or AR objective."""

from __future__ import annotations

import math
import os
import shlex
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from fsc.cli.bounds import MAX_B, MAX_S
from fsc.cli.common import (
    INVOKED,
    Choice,
    JsonOpt,
    StoreOpt,
    err,
    finite,
    given_options,
    out,
    output_dir,
    print_json,
    printable,
    store_dir,
    torch_device,
    torch_threads,
)
from fsc.errors import UsageError
from fsc.train import ranks
from fsc.train.fits import check_training_fits
from fsc.train.tasks import MAX_KEY_DIGITS

MAX_STEPS = 10**8
MAX_NPROC = 1024
MAX_MINUTES = 10**6
# The launcher's torchrun passes these on to the processes it started (its default lacks USR1/2).
TORCHRUN_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2"


class Objective(Choice):
    frontier = "frontier"
    ar = "ar"
    blocks = "blocks"


class Weighting(Choice):
    elbo = "elbo"
    masked = "masked"


class TrainDType(Choice):
    auto = "auto"
    fp32 = "fp32"
    bf16 = "bf16"


class TrainBackend(Choice):
    auto = "auto"
    torch = "torch"
    fla = "fla"


# What a resumed run keeps from its stored config (giving one of these with --resume is an
# error, not silently ignored); --steps may extend it, --stop-after, --save-every,
# --save-minutes, --keep, --eval-every, --log-every, --stop-at, --device and --train-backend
# may change.
RUN_SETTINGS = ("source", "data", "seq_len", "out", "objective", "weighting", "batch", "accum", "lr",
                "warmup", "weight_decay", "grad_clip", "seed", "dtype", "needle_digits",
                "supervise_needle", "pairs", "text_field", "tokenizer")


def _count(name: str, help: str, low: int = 1, high: int = MAX_STEPS):
    return typer.Option(name, min=low, max=high, help=help, show_default=False)


def train(
    ctx: typer.Context,
    source: Annotated[str | None, typer.Argument(
        metavar="RECIPE", help="Recipe file, shipped recipe name or checkpoint dir to start "
        "from (not with --resume).", show_default=False)] = None,
    data: Annotated[str | None, typer.Option(
        "--data", help="passkey, mqar, copy, a .txt/.jsonl/.parquet file, or "
        "hf:NAME[:CONFIG][:SPLIT] (needs fsc[data]).", show_default=False)] = None,
    seq_len: Annotated[int | None, _count("--seq-len", "Tokens per sequence (a multiple of G).",
                                          high=MAX_S)] = None,
    steps: Annotated[int | None, _count("--steps", "Optimizer steps in all (the schedule's "
                                        "length; with --resume, may extend it).")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="Training directory: step-NNNNNN checkpoints and `latest`.",
        show_default=False)] = None,
    objective: Annotated[Objective | None, typer.Option(
        "--objective", help="frontier (default when G > 1), blocks (every block a frontier in one "
        "two-stream forward) or ar (trains the recipe at G = 1).",
        show_default=False)] = None,
    weighting: Annotated[Weighting | None, typer.Option(
        "--weighting", help="Frontier loss: elbo (1/t, the bound) or masked (a mean over the "
        "masked positions; lower variance). Default elbo.", show_default=False)] = None,
    batch: Annotated[int, _count("--batch", "Sequences per micro-batch (default 16).",
                                 high=MAX_B)] = 16,
    accum: Annotated[int, _count("--accum", "Micro-batches per optimizer step (default 1).",
                                 high=4096)] = 1,
    lr: Annotated[float, typer.Option("--lr", callback=finite(0, 10, low_open=True),
                                      help="Peak learning rate.")] = 3e-3,
    warmup: Annotated[int | None, _count("--warmup", "Linear warmup steps (default: a tenth "
                                         "of --steps, at most 100).", low=0)] = None,
    weight_decay: Annotated[float, typer.Option(
        "--weight-decay", callback=finite(0, 10), help="AdamW decay of the matrices.")] = 0.1,
    grad_clip: Annotated[float, typer.Option(
        "--grad-clip", callback=finite(0, 1e6), help="Clip the gradient norm (0: off).")] = 1.0,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**62,
                                      help="Seed of the weights, the data and the masks.")] = 0,
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")] = "cpu",
    dtype: Annotated[TrainDType, typer.Option(
        "--dtype", help="auto: bf16 autocast on CUDA, fp32 on the CPU.")] = TrainDType.auto,
    train_backend: Annotated[TrainBackend, typer.Option(
        "--train-backend", help="The recurrent mixers' training forms: torch (chunked forms), "
        "fla (flash-linear-attention kernels, CUDA; pip install 'fsc[fla]'), or auto: fla on "
        "CUDA when it is installed.")] = TrainBackend.auto,
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
    log_every: Annotated[int, _count("--log-every", "Store a step row every N steps.")] = 10,
    needle_digits: Annotated[int | None, _count(
        "--needle-digits", "passkey: digits of the key (default: the smallest multiple of G "
        "that is at least 4, so the key fills its answer blocks).", high=MAX_KEY_DIGITS)] = None,
    supervise_needle: Annotated[bool, typer.Option(
        "--supervise-needle", help="passkey: also train on the needle's repeat of the key "
        "(not scored).")] = False,
    pairs: Annotated[int, _count("--pairs", "mqar: key-value pairs per sample.",
                                 high=676)] = 8,
    text_field: Annotated[str, typer.Option(
        "--text-field", help=".jsonl/.parquet/hf: the field holding the text.")] = "text",
    tokenizer: Annotated[Path | None, typer.Option(
        "--tokenizer", help="Local Hugging Face tokenizer directory (default: bytes).",
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
) -> None:
    """Train with the single-frontier objective (or next-token for ar); checkpoints, a
    training-state file for --resume and a row per logged step in the store.

    A rolling checkpoint is saved every 10 minutes by default (--save-minutes, --keep). Ctrl-C,
    SIGTERM, SIGUSR1 or SIGUSR2 ends the run after the step under way, saved and resumable;
    the exit status is 128 + the signal's number (130, 143, 138, 140)."""
    from fsc.source import load_source_recipe
    from fsc.tokenizer import load_tokenizer
    from fsc.train.data import open_data
    from fsc.train.loop import TrainConfig, read_state, resolve_checkpoint

    state = None
    if ranks.launched():
        nproc = nproc or ranks.world_size()
    if resume is not None:
        given = given_options(ctx, RUN_SETTINGS)
        if source is not None:
            given.insert(0, "RECIPE")
        if given:
            raise UsageError(f"--resume keeps the run's settings; drop {', '.join(given)}")
        start = resolve_checkpoint(resume)
        state = read_state(start)
        cfg = TrainConfig(**state[0]["config"])
        cfg.out = str(start.parent)
        if steps is not None:
            if steps < state[0]["step"]:
                raise UsageError(f"--steps {steps} is below the {state[0]['step']} steps "
                                 f"{start} has done")
            cfg.steps = steps
        changed = {"save_every": save_every, "save_minutes": save_minutes, "keep": keep,
                   "eval_every": eval_every, "log_every": log_every, "stop_at": stop_at,
                   "train_backend": str(train_backend)}
        for name in given_options(ctx, tuple(changed)):  # the stored ones unless given
            key = name.lstrip("-").replace("-", "_")
            setattr(cfg, key, changed[key])
        if nproc is not None and nproc != cfg.nproc:
            raise UsageError(f"--nproc {nproc}: the run trains with {cfg.nproc} process(es) "
                             "(its global batch); resume it with the same")
        recipe = load_source_recipe(start)  # the recipe trained (G = 1 for ar)
        weights = str(start)
    else:
        missing = [n for n, v in (("RECIPE", source), ("--data", data), ("--seq-len", seq_len),
                                  ("--steps", steps), ("--out", out_dir)) if v is None]
        if missing:
            raise UsageError(f"fsc train needs {', '.join(missing)} (or --resume DIR)")
        if warmup is not None and warmup > steps:
            raise UsageError(f"--warmup {warmup} is longer than --steps {steps}: the learning "
                             "rate would never reach --lr")
        recipe = load_source_recipe(source)
        G = recipe.block_size
        goal = str(objective) if objective else ("frontier" if G > 1 else "ar")
        if goal == "ar" and G > 1:
            recipe = recipe.model_copy(update={"block_size": 1})
        if ranks.rank_from_env() == 0:  # the launcher and rank 0 check; the others write nothing
            output_dir(out_dir, "--out",
                       hint="; continue a run with --resume DIR, or pick a new --out")
        cfg = TrainConfig(
            source=source, data=data, seq_len=seq_len, steps=steps, out=str(out_dir),
            objective=goal, weighting=str(weighting or "elbo"), batch=batch, accum=accum, lr=lr,
            warmup=min(100, steps // 10) if warmup is None else warmup,
            weight_decay=weight_decay, grad_clip=grad_clip, seed=seed, device=device,
            dtype=str(dtype), train_backend=str(train_backend), save_every=save_every,
            save_minutes=save_minutes, keep=keep,
            eval_every=eval_every, log_every=log_every, needle_digits=needle_digits,
            supervise_needle=supervise_needle, pairs=pairs,
            text_field=text_field, tokenizer=str(tokenizer) if tokenizer else None,
            recipe_yaml=recipe.to_yaml(), nproc=nproc or 1, stop_at=stop_at)
        weights = source
    G = recipe.block_size
    if cfg.seq_len % G:
        raise UsageError(f"--seq-len {cfg.seq_len} is not a multiple of the block size G = {G}")
    tok = load_tokenizer(cfg.tokenizer)
    if tok.vocab_size > recipe.vocab_size:
        raise UsageError(f"the tokenizer has {tok.vocab_size} tokens but {recipe.name}'s "
                         f"vocab_size is {recipe.vocab_size}")
    check_training_fits(recipe, device, cfg.seq_len, cfg.batch, cfg.nproc)
    data_source = open_data(cfg.data, tok, cfg.seq_len, G, cfg.seed, cfg.data_options())
    if cfg.stop_at is not None and not (cfg.eval_every and data_source.supervises == "answer"):
        raise UsageError(f"--stop-at {cfg.stop_at:g} needs an in-loop eval: --eval-every N on "
                         "a task (passkey, mqar or copy)")

    # Everything a user can get wrong is checked; now torch (or the processes that import it).

    if cfg.nproc > 1 and not ranks.launched():
        _launch(cfg.nproc, device)
        return
    from fsc.loading import check_fits, free_bytes
    from fsc.train import parallel

    torch_threads()
    cfg.device = ranks.device_of(torch_device(device))
    rank, size = parallel.setup(cfg.device)
    if size != cfg.nproc:
        raise UsageError(f"--nproc {cfg.nproc}, but {size} processes were launched")
    if cfg.dtype == "auto":
        cfg.dtype = "bf16" if cfg.device.startswith("cuda") else "fp32"
    if cfg.dtype == "bf16" and not cfg.device.startswith("cuda"):
        raise UsageError("--dtype bf16 autocasts on CUDA; the CPU trains in fp32")
    check_fits(recipe.with_dtype("fp32"), cfg.device, S=cfg.seq_len, B=cfg.batch, G=G)
    check_training_fits(recipe, cfg.device, cfg.seq_len, cfg.batch, cfg.nproc,
                        free_bytes(cfg.device))
    model = _model(recipe, weights, cfg, state is not None)
    try:
        if rank == 0:
            _run(cfg, recipe, model, tok, data_source, state, stop_after, store, as_json)
        else:
            _follow(cfg, recipe, model, tok, data_source, state, stop_after)
    finally:
        parallel.close()


def _launch(nproc: int, device: str) -> None:
    """Run this same command in `nproc` processes under torch's elastic launcher, on this node
    and on loopback only; exit with its status."""
    import subprocess

    cuda = device.startswith("cuda") or (device == "auto" and _has_cuda())
    if cuda and nproc > _gpu_count():
        raise UsageError(f"--nproc {nproc}: this machine shows {_gpu_count()} GPUs (one process "
                         "per GPU)")
    import signal

    from fsc.interrupts import STOP_SIGNALS, StopSignals, exit_code

    env = dict(os.environ, **{ranks.WORKER_ENV: "1", "OMP_NUM_THREADS": "1"})
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # the processes talk over loopback
    env.setdefault("TORCHELASTIC_SIGNALS_TO_HANDLE", TORCHRUN_SIGNALS)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={nproc}", "--master-addr=127.0.0.1", "-m", "fsc",
           *_without_nproc(INVOKED)]  # the workers read N from torchrun's WORLD_SIZE
    err.print(f"training in {nproc} processes (torchrun); rank 0 writes the store and the "
              "checkpoints", markup=False, highlight=False)
    # In a session of its own, torchrun hears a stop signal once, from here (not also from the
    # terminal), and passes it on once to every process: each ends after the same step, saved.
    # A hang-up (the terminal closed) is passed on too, and ends the processes as before.
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    with StopSignals(defer=True, forward=proc.send_signal,
                     signals=(*STOP_SIGNALS, signal.SIGHUP)) as stops:
        code = proc.wait()
    if stops.signum is not None:
        raise typer.Exit(exit_code(stops.signum))
    if code:
        raise typer.Exit(code)


def _without_nproc(args: list[str]) -> list[str]:
    kept, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            kept.append(a)
    return kept


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count()


def _follow(cfg, recipe, model, tok, data_source, state, stop_after) -> None:
    """A rank other than 0: the same steps, its share of each batch, no store or output."""
    from fsc.interrupts import exit_code
    from fsc.train.loop import Trainer

    res = Trainer(cfg, recipe, model, tok, state=state, data=data_source).run(stop_after)
    if res.interrupted:
        raise typer.Exit(exit_code(res.stop_signal))


def _model(recipe, weights: str, cfg, resuming: bool):
    """fp32 master weights on the device: a checkpoint's (resuming, or starting from one) or
    the recipe's seeded initial ones."""
    import torch

    from fsc.hub.checkpoint import load_checkpoint
    from fsc.model.lm import build_model
    from fsc.source import is_checkpoint

    if resuming or is_checkpoint(weights):
        _, model = load_checkpoint(weights, device=cfg.device, dtype=torch.float32)
        model.recipe = recipe  # ar training of a G > 1 checkpoint: the same weights at G = 1
        return model
    return build_model(recipe, device=cfg.device, seed=cfg.seed, dtype=torch.float32,
                       state_dtype=torch.float32)


def _run(cfg, recipe, model, tok, data_source, state, stop_after, store, as_json) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from fsc.cli.common import bar_text
    from fsc.hub.registry import register_trained
    from fsc.interrupts import exit_code, signal_name, signum_of
    from fsc.provenance import environment
    from fsc.store import Store
    from fsc.train.evaluate import quick_eval
    from fsc.train.loop import Trainer

    trainer = Trainer(cfg, recipe, model, tok, state=state, data=data_source)
    start_step = trainer.step
    st = Store(store_dir(store))
    st.register_recipe(recipe.name, recipe.recipe_hash, recipe.to_yaml(), recipe.layer_plan)
    env_id = st.register_environment(environment(cfg.device))
    config = {**asdict(cfg), "recipe": recipe.name, "recipe_hash": recipe.recipe_hash,
              "resumed_from_step": start_step if state is not None else None}
    run_id = st.start_run("train", " ".join(["fsc", *sys.argv[1:]]), env_id, config)
    facts = {"recipe": recipe.name, "recipe_hash": recipe.recipe_hash,
             "objective": cfg.objective, "data": cfg.data}
    evals: list[dict] = []  # the in-loop evals, for --json and the console

    def log(row: dict) -> None:
        st.add_rows("train_steps", run_id, [{**facts, **row}])
        if "eval_accuracy" in row:
            evals.append({"step": row["step"], "accuracy": row["eval_accuracy"]})
            err.print(f"step {row['step']}: in-loop exact match {row['eval_accuracy']:.2f}, "
                      f"loss {row['loss']:.4f}", markup=False, highlight=False)

    trainer.on_log = log
    if data_source.supervises == "answer":
        trainer.evaluate = quick_eval
    try:
        with Progress(bar_text(), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TimeRemainingColumn(), console=err,
                      transient=False) as bar:
            task = bar.add_task(f"train {printable(recipe.name, 40)}", total=cfg.steps, completed=start_step)

            def advance(step: int, loss: float, tokens_per_s: float) -> None:
                bar.update(task, completed=step, description=(
                    f"train {printable(recipe.name, 40)}: loss {loss:.4f}, "
                    f"{tokens_per_s / 1e3:.1f}k tok/s"))

            trainer.on_step = advance
            res = trainer.run(stop_after)
    except KeyboardInterrupt as e:  # a second Ctrl-C: the step under way is lost
        st.finish_run(run_id, "interrupted", f"interrupted in step {trainer.step + 1} by "
                      f"{signal_name(signum_of(e))}, not saved")
        raise
    except BaseException as e:
        st.finish_run(run_id, "failed", f"{type(e).__name__}: {e}")
        raise
    resume_cmd = f"fsc train --resume {shlex.quote(cfg.out)}"
    if store is not None:
        resume_cmd += f" --store {shlex.quote(str(store))}"
    stopped = (f"interrupted at step {res.step} by {signal_name(res.stop_signal)}"
               if res.interrupted else None)
    st.finish_run(run_id, "interrupted" if res.interrupted else "finished", stopped)
    register_trained(st.dir, cfg.out, start_step, recipe.recipe_hash)  # fsc artifacts lists them
    done = res.losses[start_step:]
    summary = {"run_id": run_id, "store": str(st.file), "recipe": recipe.name,
               "objective": cfg.objective, "data": cfg.data, "step": res.step,
               "steps": cfg.steps, "first_loss": done[0] if done else None,
               "final_loss": res.final_loss if done else None, "seconds": res.seconds,
               "tokens_per_s": res.tokens / res.seconds if res.seconds > 0 else None,
               "checkpoint": res.checkpoint, "interrupted": res.interrupted,
               "stop_at": cfg.stop_at, "reached": res.reached, "evals": evals}
    if as_json:
        print_json(summary)
    else:
        first = f"{done[0]:.4f} → " if len(done) > 1 else ""
        loss = f"loss {first}{res.final_loss:.4f}" if done else "no steps"
        rate = summary["tokens_per_s"]
        speed = f", {rate / 1e3:.1f}k tok/s" if rate and math.isfinite(rate) else ""
        reached = (f"; stopped at exact match {evals[-1]['accuracy']:.2f} ≥ {cfg.stop_at:g} "
                   f"at step {res.step}" if res.reached else "")
        out.print(f"trained {printable(recipe.name, 60)} to step {res.step} of {cfg.steps} on "
                  f"{printable(cfg.data, 80)} ({cfg.objective}): {loss}, {res.seconds:.1f} s"
                  f"{speed}{reached}; checkpoint {printable(res.checkpoint, None)}; run {run_id}",
                  markup=False, highlight=False)
    if res.interrupted:
        print(f"{stopped}; continue with:\n  {resume_cmd}", file=sys.stderr)
        raise typer.Exit(exit_code(res.stop_signal))
    if res.step < cfg.steps and not res.reached:
        print(f"stopped at step {res.step} of {cfg.steps}; continue with:\n  {resume_cmd}",
              file=sys.stderr)


def register(app: typer.Typer) -> None:
    app.command("train")(train)
