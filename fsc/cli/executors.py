"""The executor options `fsc profile` and `fsc eval` share (--executor, --workers, Ray's and
Slurm's), declared once: `with_executor_options` adds them to a command and hands the command
one checked fsc.scale.ExecutorSettings."""

from __future__ import annotations

import functools
import inspect
from dataclasses import fields
from typing import Annotated

import typer

from fsc.cli.bounds import MAX_WORKERS, between
from fsc.cli.common import Choice, given_options
from fsc.cli.eval_harness import harness_asked
from fsc.scale import ExecutorSettings


class Executor(Choice):
    local = "local"
    ray = "ray"
    slurm = "slurm"


_DEFAULTS = ExecutorSettings()
_OPTIONS = {
    "executor": Annotated[Executor, typer.Option(
        "--executor", help="Where points run: local (this machine; --workers processes), ray "
        "(a Ray cluster, pip install 'fsc[ray]') or slurm (job arrays through submitit, "
        "pip install 'fsc[slurm]').")],
    "workers": Annotated[int, typer.Option(
        "--workers", callback=between(1, MAX_WORKERS),
        help="local: worker processes, one per visible GPU on CUDA (1: in this process). ray, "
        "slurm: groups run at once (fsc profile cuts its sweep into at least 2 × N groups of "
        "points; ray's default N: the cluster's GPUs, or CPUs; slurm's: one array task per "
        "recipe; fsc eval scores a group per prompt length).")],
    "address": Annotated[str, typer.Option(
        "--address", help="ray: the cluster, auto (RAY_ADDRESS's, else a running one), "
        "ray://host:port, or local (a new one on this machine).")],
    "retries": Annotated[int, typer.Option(
        "--retries", callback=between(0, 100),
        help="Times a group is run again after its worker died or failed; then fsc profile "
        "records its points as errors, and fsc eval fails the run, keeping the cells scored.")],
    "slurm_partition": Annotated[str | None, typer.Option(
        "--slurm-partition", help="slurm: the partition (default: the cluster's).",
        show_default=False)],
    "slurm_gpus_per_node": Annotated[int, typer.Option(
        "--slurm-gpus-per-node", callback=between(0, 64),
        help="slurm: GPUs each array task asks for.")],
    "slurm_time": Annotated[int, typer.Option(
        "--slurm-time", callback=between(1, 60 * 24 * 30),
        help="slurm: time limit of each array task, minutes.")],
}
assert list(_OPTIONS) == [f.name for f in fields(ExecutorSettings)]


def with_executor_options(command):
    """`command` (a typer command taking `ctx` and `scale`) with the executor options added
    before its --store, their defaults ExecutorSettings'. Before the command runs they are
    checked (ExecutorSettings.check) and handed to it as `scale`."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values()
           if p.name != "scale"]
    at = next(i for i, p in enumerate(own) if p.name == "store")
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                               default=getattr(_DEFAULTS, name))
             for name, annotation in _OPTIONS.items()]
    added[0] = added[0].replace(default=Executor(_DEFAULTS.executor))
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[:at]]
    params += added + [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own[at:]]

    @functools.wraps(command)
    def run(ctx: typer.Context, **values):
        scale = {name: values.pop(name) for name in _OPTIONS}
        scale["executor"] = str(scale["executor"])
        settings = ExecutorSettings(**scale)
        if not harness_asked(values):  # the harness refuses them itself, in its own words
            settings.check(given_options(ctx, tuple(_OPTIONS)))
        return command(ctx, scale=settings, **values)

    run.__signature__ = inspect.Signature(params)
    run.__annotations__ = {p.name: p.annotation for p in params}
    return run
