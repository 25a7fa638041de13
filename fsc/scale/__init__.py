"""Running sweeps beyond this process: local worker processes, Ray, Slurm (submitit); and
data-parallel training under torchrun. This module is light: the CLI checks options with it
before torch is imported."""

from __future__ import annotations

import importlib.util

from fsc.errors import UsageError

EXTRAS = {"ray": ("ray", "fsc[ray]"), "slurm": ("submitit", "fsc[slurm]")}


def needs(executor: str) -> None:
    """UsageError unless the executor's optional package is installed."""
    if executor in EXTRAS:
        module, extra = EXTRAS[executor]
        if importlib.util.find_spec(module) is None:
            raise UsageError(f"--executor {executor} needs {module}: pip install '{extra}'")
