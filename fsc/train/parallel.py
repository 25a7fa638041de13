"""Data-parallel training on one node: `fsc train --nproc N` runs N processes under torch's
elastic launcher (torchrun), one per GPU (or N on the CPU, with gloo).

Every process draws the whole global batch (N × --batch sequences, seeded as one process would
draw it) and its mask draws, then trains on its own slice of it. After the backward pass the
gradients are averaged over the processes by one all-reduce, so every process takes the same
optimizer step, and N processes follow one process with the N-times batch up to the order of
float sums. (The averaging is what DistributedDataParallel's reducer does. Training runs
through the model's block-wise forward rather than `forward`, which that wrapper hooks, so fsc
all-reduces itself.) Only rank 0 writes the store and the checkpoints.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from fsc.train.ranks import launched


def setup(device: str) -> tuple[int, int]:
    """Join the process group (nccl on CUDA, gloo on the CPU) when launched; (rank, world)."""
    if not launched():
        return 0, 1
    if not dist.is_initialized():
        if device.startswith("cuda"):
            torch.cuda.set_device(torch.device(device))
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return dist.get_rank(), dist.get_world_size()


def world() -> tuple[int, int]:
    """(rank, number of processes) of this training run."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def average_gradients(model: torch.nn.Module, size: int) -> None:
    """Average the gradients over the processes in one flat all-reduce. A parameter keeps no
    gradient only where no process has one, as in one process with the whole batch."""
    if size == 1:
        return
    params = list(model.parameters())
    device = params[0].device
    has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=device)
    dist.all_reduce(has)
    used = [p for p, h in zip(params, has.tolist()) if h > 0]
    for p in used:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in used])
    dist.all_reduce(flat)
    flat /= size
    offset = 0
    for p in used:
        n = p.grad.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
        offset += n


def mean(value: float, size: int, device: torch.device) -> float:
    """The mean of a per-process figure over the processes."""
    if size == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return float(t) / size


def gather_rows(t: torch.Tensor, size: int) -> torch.Tensor:
    """Every process's `t` (rows first) concatenated in rank order, on every one."""
    if size == 1:
        return t
    parts = [torch.empty_like(t) for _ in range(size)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts)


def largest(values: tuple[int, ...], size: int, device: torch.device) -> tuple[int, ...]:
    """Each per-process integer's largest value over the processes, on every one, in one
    all-reduce (a stop signal or a reached --stop-at seen by one stops all, after the same
    step)."""
    if size == 1:
        return values
    t = torch.tensor(values, dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(int(v) for v in t.tolist())


def close() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
