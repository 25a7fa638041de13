"""Which process of a `fsc train --nproc N` run this is, from torchrun's environment (light:
the CLI asks before torch is imported)."""

from __future__ import annotations

import os

WORKER_ENV = "FSC_TRAIN_WORKER"  # set by the launching fsc: this process is one of N


def launched() -> bool:
    """Whether this process was started by `fsc train --nproc N` under torchrun."""
    return os.environ.get(WORKER_ENV) == "1" and "WORLD_SIZE" in os.environ


def rank_from_env() -> int:
    return int(os.environ.get("RANK", "0")) if launched() else 0


def device_of(device: str) -> str:
    """A worker's device: its own GPU (LOCAL_RANK) on CUDA."""
    if launched() and device.startswith("cuda"):
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return device


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1")) if launched() else 1
