"""Whether a training run fits in memory, checked before any data is prepared or torch is
loaded for the CPU (the cost model's `training_memory` against the memory free)."""

from __future__ import annotations

from fsc.costmodel.training import training_memory
from fsc.errors import UsageError

GiB = 2**30


def host_free_bytes() -> int:
    """MemAvailable of this machine (no limit known: a very large number)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 2**63


def free_bytes(device: str) -> int:
    """Memory the run may take on `device` (cpu, cuda, cuda:N or auto): torch is imported only
    for a device that may be a GPU."""
    if device == "cpu":
        return host_free_bytes()
    import torch

    from fsc.loading import free_bytes as device_free

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return device_free(device)
    except (RuntimeError, ValueError):  # a bad --device: its own check says so later
        return 2**63


def check_training_fits(recipe, device: str, seq_len: int, batch: int, nproc: int = 1,
                        budget: int | None = None) -> None:
    """UsageError (one line, exit 2) when one training step of `recipe` at (seq_len, batch)
    needs more than `budget` bytes (default: what `device` has free). With `nproc` processes
    on the CPU, each holds its own copy of the weights and optimizer state."""
    mem = training_memory(recipe, seq_len, batch)
    copies = nproc if device == "cpu" else 1
    need = mem["total_bytes"] + (copies - 1) * mem["state_bytes"]
    have = free_bytes(device) if budget is None else budget
    if need <= have:
        return
    parts = ", ".join(f"{name} {mem[key] / GiB:.2f}" for name, key in (
        ("weights and optimizer", "state_bytes"), ("activations", "activation_bytes"),
        ("attention masks", "mask_bytes"), ("logits", "logits_bytes")) if mem[key])
    raise UsageError(
        f"not enough memory to train {recipe.name} at --seq-len {seq_len}, --batch {batch}: "
        f"it needs at least {need / GiB:,.1f} GiB ({parts} GiB) but {device} has "
        f"{have / GiB:,.1f} GiB free; lower --seq-len or --batch")
