"""Whether a training run fits in memory (the cost model's `training_memory` against the memory
free): on the CPU before any data is prepared or torch is loaded; on a GPU once torch can say
how much of it is free."""

from __future__ import annotations

from fsc.costmodel.devices import host_free_bytes
from fsc.costmodel.training import training_memory
from fsc.errors import UsageError
from fsc.text import human_bytes


def check_training_fits(recipe, device: str, seq_len: int, batch: int, nproc: int = 1,
                        budget: int | None = None, objective: str = "frontier") -> None:
    """UsageError (one line, exit 2) when one training step of `recipe` at (seq_len, batch)
    of `objective` needs more than `budget` bytes (default: on the CPU, the memory available; elsewhere no
    check: the caller checks again with the device's free memory). With `nproc` processes on
    the CPU, each holds its own copy of the weights and optimizer state, and the activations of
    its own batch (--batch is each process's)."""
    if budget is None and device != "cpu":
        return
    mem = training_memory(recipe, seq_len, batch, objective)
    copies = nproc if device == "cpu" else 1
    need = copies * mem.total_bytes
    have = host_free_bytes() if budget is None else budget
    if need <= have:
        return
    parts = ", ".join(f"{name} {human_bytes(part)}" for name, part in (
        ("weights and optimizer", mem.state_bytes), ("activations", mem.activation_bytes),
        ("attention masks", mem.mask_bytes), ("logits", mem.logits_bytes)) if part)
    if copies > 1:
        parts = f"{copies} processes, each {parts}"
    raise UsageError(
        f"not enough memory to train {recipe.name} at --seq-len {seq_len}, --batch {batch}: "
        f"it needs at least {human_bytes(need)} ({parts}) but {device} has "
        f"{human_bytes(have)} free; lower --seq-len or --batch"
        + (" or --nproc" if copies > 1 else ""))
