"""Each Triton kernel against its reference on fresh random inputs (`fsc verify --backend triton`).

Small shapes (`SHAPES_DRY`, as `python -m tools.gpucheck --dry-run` uses): on a GPU in bf16 against the fp32
reference, on the CPU under the Triton interpreter in fp32. A new seed every call.
"""

from __future__ import annotations

import secrets

import torch
from fsc.kernels.points import SHAPES_DRY, attention_points, state_points

from fsc.accuracy import worst_error

TOLERANCE = {torch.bfloat16: 2e-2, torch.float32: 1e-4}


def check_kernels(device="cpu") -> list[dict]:
    """One row per kernel (and mode): op, mode, dtype, max relative error, ok."""
    device = torch.device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    seed = secrets.randbits(31)
    gen = torch.Generator(device).manual_seed(seed)
    points = [p for S in (0, 37) for p in attention_points(2, S, SHAPES_DRY, dtype, device, gen)]
    points += state_points(2, SHAPES_DRY, dtype, device, gen)
    rows = []
    for p in points:
        if p.accuracy is None:
            continue
        errs = p.accuracy()
        err = worst_error(errs.values())  # (NaN where any is: it fails)
        name = p.op if p.S is None else f"{p.op} (S={p.S})"
        rows.append({"op": name, "mode": p.mode, "dtype": str(dtype).removeprefix("torch."),
                     "max_err": err, "tol": TOLERANCE[dtype], "ok": err <= TOLERANCE[dtype],
                     "seed": seed})
    return rows
