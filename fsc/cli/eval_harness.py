"""`fsc eval --task harness`: the options the harness takes checked, one library call
(fsc.harness.run.evaluate_harness), its table or JSON."""

from __future__ import annotations

import sys
from dataclasses import fields
from pathlib import Path

import typer

from fsc.blocks import MAX_G
from fsc.cli.bounds import parse_sizes
from fsc.cli.common import (
    check_store,
    command_line,
    given_options,
    out,
    print_json,
    printable,
    say,
    torch_threads,
)
from fsc.errors import UsageError
from fsc.scale import ExecutorSettings

# The options only the harness takes, and the grid options it takes too (its tasks set their
# own prompts; --steps is generation's K).
HARNESS_OPTIONS = ("tasks", "include_path", "limit", "num_fewshot", "max_length", "mc_samples",
                   "log_samples", "output_path")
TAKES = ("task", "batch", "seed", "steps")


def harness_asked(values: dict) -> bool:
    """Whether `fsc eval`'s options (`values`, by name) ask for the harness: --task harness,
    or --tasks without --task. It runs in this process and refuses every executor option
    given (`evaluate_harness`)."""
    task = values.get("task")
    return str(task) == "harness" or (task is None and values.get("tasks") is not None)


def evaluate_harness(ctx: typer.Context, source: str | None, resume: str | None,
                     grid_options: tuple[str, ...], store: Path | None, as_json: bool, *,
                     tasks: str | None, include_path: str | None, limit: float | None,
                     num_fewshot: int | None, max_length: int | None, mc_samples: int,
                     batch: int, seed: int,
                     device: str, steps: str | None, log_samples: bool,
                     output_path: str | None) -> None:
    """Check the harness's options (UsageError for a grid option it does not take, --resume,
    or several --steps), run it into the store and show its rows."""
    if resume is not None:
        raise UsageError("--resume: a harness run is scored whole; run it again")
    spread = _executor_options(ctx)
    if spread:
        raise UsageError(f"{', '.join(spread)}: --task harness runs in this process, on one "
                         f"device (--device); drop {'it' if len(spread) == 1 else 'them'}")
    others = given_options(ctx, tuple(o for o in grid_options if o not in TAKES))
    if others:
        raise UsageError(f"{', '.join(others)}: not used by --task harness (its tasks set "
                         "their own prompts; see --tasks, --limit, --num-fewshot)")
    K = parse_sizes(steps, "--steps", 1, MAX_G) if steps is not None else None
    if K is not None and len(K) > 1:
        raise UsageError(f"--steps {steps}: --task harness generates with one K")
    try:
        from fsc.harness.run import LM_EVAL_SEEDS, HarnessRequest
        from fsc.harness.run import evaluate_harness as run
    except ImportError as e:  # lm_eval, or what it needs, is not installed
        raise UsageError(f"--task harness needs lm-evaluation-harness ({e}): pip install "
                         "'fsc[harness]'") from None

    names = tuple(t.strip() for t in (tasks or "").split(",") if t.strip())
    mc = mc_samples if given_options(ctx, ("mc_samples",)) else None  # (refused at G 1)
    from fsc.source import located_ref

    # local paths by their absolute path: the run's record, and the harness's output folder
    # (OUT/<model>/, named for the model's path: relative, it was the checkpoint's own folder)
    request = HarnessRequest(located_ref(source) or "", names,
                             located_ref(str(include_path)) if include_path else None,
                             limit, num_fewshot, mc, batch, seed, device,
                             max_length=max_length, steps=K[0] if K else None,
                             log_samples=log_samples,
                             output_path=str(output_path) if output_path else None,
                             harness_seeds=((seed,) * 4 if given_options(ctx, ("seed",))
                                            else LM_EVAL_SEEDS))
    from fsc.interrupts import Stopped

    torch_threads()
    st = check_store(store)
    try:
        done = run(request, st, command_line())
    except Stopped as e:  # its rows are stored when every task is done: none yet
        print(f"interrupted: run {e.run_id} stored nothing (a harness run is scored whole); "
              "run it again", file=sys.stderr)
        raise typer.Exit(e.exit_code) from None
    for path in done.files:
        say(f"wrote {path}")
    if as_json:
        scored = done.rows[0]["checkpoint"] if done.rows else request.source  # resolved
        print_json({"run_id": done.run_id, "store": str(st.file), "checkpoint": scored,
                    "task": "harness", "seconds": done.seconds, "files": done.files,
                    "rows": done.rows})
        return
    render_harness(done.rows, done.run_id, done.seconds)


def _executor_options(ctx: typer.Context) -> list[str]:
    """The executor options given (`--executor ray`, `--workers 4`, ...) other than what a
    harness run does anyway (--executor local, --workers 1)."""
    names = {f.name for f in fields(ExecutorSettings)}
    given = []
    for p in ctx.command.params:
        value = ctx.params.get(p.name)
        if p.name not in names or ctx.get_parameter_source(p.name).name == "DEFAULT":
            continue
        if (p.name, str(value)) not in (("executor", "local"), ("workers", "1")):
            given.append(f"{p.opts[0]} {value}")
    return given


def render_harness(rows: list[dict], run_id: str, seconds: float) -> None:
    """A harness run: a row per task and metric, its standard error, and whether it is a
    bound (a block-diffusion model's likelihood is); on a narrow terminal the shots, n and
    s.e. columns go first (fsc.cli.eval_tables)."""
    from fsc.cli.eval_tables import show_harness

    if not rows:
        out.print(f"the harness reported no metric (run {run_id})", markup=False)
        return
    first = rows[0]
    bound = next((r for r in rows if r["bound"]), None)  # a likelihood's row: its draws
    how = first["mode"]
    if how == "diffusion":  # its G; K where a task generates, the draws where one is a bound
        how += f" G {first['G']}" + (f", K {first['K']}" if not all(r["bound"] for r in rows)
                                     else "")
        how += f", {bound['mc_samples']} draws per block" if bound else ""
    out.print(f"{printable(first['recipe'], 60)}: lm-evaluation-harness {first['harness_version']}"
              f", {how} (run {run_id}, {seconds:.1f} s)", markup=False, highlight=False)
    show_harness([{"task": printable(r["harness_task"], 40), "metric": printable(r["metric"], 30),
                   "value": _num(r["value"]),
                   "± s.e.": _num(r["value_se"]) if r["value_se"] is not None else "",
                   "n": str(r["n"] if r["n"] is not None else ""),
                   "shots": str(r["num_fewshot"] if r["num_fewshot"] is not None else "")}
                  for r in rows], out)
    if bound:
        out.print("Likelihoods of a block-diffusion model are bounds (Monte Carlo over masks): "
                  "its log-likelihood metrics are lower bounds, its perplexities upper bounds.",
                  markup=False, highlight=False)


def _num(v: float) -> str:
    return f"{v:.4f}" if abs(v) < 1e4 else f"{v:.4g}"
