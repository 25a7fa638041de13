"""How `fsc train` shows a run: the progress bar, in-loop evals, and the summary with how to
continue a run cut short."""

from __future__ import annotations

import math
import shlex
import sys
from contextlib import contextmanager
from pathlib import Path

from fsc.cli.common import err, out, print_json, printable, store_option
from fsc.interrupts import signal_name
from fsc.text import counted


@contextmanager
def progress_bar(name: str, total: int, start: int):
    """The steps as a progress bar on stderr; yields what the trainer calls after each."""
    from fsc.cli import progress

    with progress.bar(err, transient=False) as bar:
        task = bar.add_task(f"train {name}", total=total, completed=start)
        yield lambda step, loss, rate: bar.update(task, completed=step, description=(
            f"train {name}: loss {loss:.4f}, {rate / 1e3:.1f}k tok/s"))


def eval_said(step) -> None:
    """An in-loop eval on the console (stderr)."""
    err.print(f"step {step.step}: in-loop exact match {step.eval_accuracy:.2f}, "
              f"loss {step.loss:.4f}", markup=False, highlight=False)


def _origin(cfg, G: int) -> str:
    """' (adapted from CKPT at G 8, annealed over N steps)' for an adaptation, else ''."""
    was = cfg.adapted_from
    if not was:
        return ""
    anneal = f"annealed over {counted(cfg.anneal, 'step')}" if cfg.anneal else "not annealed"
    return f" (adapted from {printable(was['checkpoint'], 80)} at G {G}, {anneal})"


def _here(path: str) -> str:
    """A checkpoint or training directory as a first run names it: relative below the current
    directory (a resumed run's out is stored absolute), else as it is."""
    p = Path(path)
    if not p.is_absolute():
        return path
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:  # (elsewhere)
        return path


def _resume(out_dir: str, store: Path | None) -> str:
    """The command that continues the run in `out_dir`."""
    return f"fsc train --resume {shlex.quote(_here(out_dir))}{store_option(store)}"


def aborted(out_dir: str, store: Path | None, signum: int) -> None:
    """What a second Ctrl-C, which ends training at once (the step under way not saved),
    keeps: the last checkpoint saved, and how to go on from it."""
    latest = Path(out_dir) / "latest"
    said = (f"interrupted again ({signal_name(signum)}): training stopped at once, the "
            "step under way not saved")
    if latest.is_file():
        step = _here(str(Path(out_dir) / latest.read_text().strip()))
        said += f"; the last checkpoint is {step}; continue with:\n  {_resume(out_dir, store)}"
    else:
        said += "; no checkpoint was saved yet"
    print(said, file=sys.stderr)


def report(trained, store: Path | None, as_json: bool) -> None:
    """The summary (--json: the document) and how to continue a run cut short."""
    cfg, res, done = trained.job.cfg, trained.result, trained.losses
    summary = trained.summary()
    if as_json:  # a resumed run's checkpoint as a first run names it (its out is stored absolute)
        resumed = trained.job.state is not None and summary["checkpoint"]
        print_json({**summary, "checkpoint": _here(summary["checkpoint"]) if resumed
                    else summary["checkpoint"]})
    elif not summary["trained"]:  # stopped before its first step: its start saved, to resume
        recipe = trained.job.recipe
        out.print(f"{printable(recipe.name, 60)}{_origin(cfg, recipe.block_size)} on "
                  f"{printable(cfg.data, 80)} ({cfg.objective}): interrupted before its first "
                  f"step, nothing trained; the weights it started from are kept in "
                  f"{printable(_here(res.checkpoint), None)} for --resume; run {trained.run_id}",
                  markup=False, highlight=False, soft_wrap=True)
    else:
        start = res.step - len(done) + 1  # a resumed run's first step here: not step 1
        first = (f"{done[0]:.4f}{f' (step {start})' if start > 1 else ''} → "
                 if len(done) > 1 else "")
        loss = f"loss {first}{res.final_loss:.4f}" if done else "no steps"
        rate = summary["tokens_per_s"]
        speed = f", {rate / 1e3:.1f}k tok/s" if rate and math.isfinite(rate) else ""
        reached = (f"; stopped at exact match {trained.evals[-1]['accuracy']:.2f} ≥ "
                   f"{cfg.stop_at:g} at step {res.step}" if res.reached else "")
        recipe = trained.job.recipe
        out.print(f"trained {printable(recipe.name, 60)}{_origin(cfg, recipe.block_size)} to "
                  f"step {res.step} of {cfg.steps} on {printable(cfg.data, 80)} "
                  f"({cfg.objective}): {loss}, "
                  f"{res.seconds:.1f} s{speed}{reached}; checkpoint "
                  f"{printable(_here(res.checkpoint), None)}; run {trained.run_id}",
                  markup=False, highlight=False, soft_wrap=True)  # one line a reader can parse
    resume_cmd = _resume(cfg.out, store)
    cut = trained.stopped if res.interrupted else (
        f"stopped at step {res.step} of {cfg.steps}" if res.step < cfg.steps and not res.reached
        else None)
    if cut:
        print(f"{cut}; continue with:\n  {resume_cmd}", file=sys.stderr)
