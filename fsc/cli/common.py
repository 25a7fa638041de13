"""Shared option aliases and output helpers for every command group."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

# Human tables on stdout; when stdout is not a terminal (a log, a pipe) rich would wrap wide
# tables at 80 columns, so give them room.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)  # progress and logs: stderr

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
StoreOpt = Annotated[
    Path | None,
    typer.Option("--store", help="Store directory (default: $FSC_STORE or ./store).", show_default=False),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Random seed.")]
BackendOpt = Annotated[
    str,
    typer.Option("--backend", help="Kernel backend: auto (Triton on CUDA), torch or triton."),
]


def store_dir(store: Path | None) -> Path:
    """The store directory: --store, then $FSC_STORE, then ./store."""
    if store is not None:
        return store
    env = os.environ.get("FSC_STORE")
    return Path(env) if env else Path("store")


def _finite(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def print_json(doc: Any) -> None:
    """One JSON document on stdout; non-finite numbers become null."""
    print(json.dumps(_finite(doc), indent=2, default=str, allow_nan=False))


def fmt_bytes(n: float | None) -> str:
    """Binary units, stated explicitly (KiB, MiB, GiB)."""
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def fmt_count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def torch_threads() -> int:
    """Set torch's CPU threads from $FSC_THREADS (default 1) and return the number.

    Tiny CPU models gain nothing from more threads, and on a busy 2-core machine OpenMP
    spin-waits made a 2-thread forward pass up to 30× slower than a 1-thread one.
    """
    import torch

    raw = os.environ.get("FSC_THREADS", "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        from fsc.errors import UsageError

        raise UsageError(f"FSC_THREADS={raw!r} must be a positive integer")
    torch.set_num_threads(n)
    return n


def torch_device(text: str) -> str:
    """Validate --device: 'auto' (CUDA when present), 'cpu', 'cuda', 'cuda:N'."""
    import torch

    from fsc.errors import UsageError

    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(text)
    except RuntimeError:
        raise UsageError(f"--device {text!r} is not a device (auto, cpu, cuda or cuda:N)") from None
    if dev.type not in ("cpu", "cuda"):
        raise UsageError(f"--device {text!r}: fsc runs on cpu or cuda")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"--device {text}: no CUDA device is available")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(f"--device {text}: only {torch.cuda.device_count()} CUDA device(s)")
    return str(dev)
