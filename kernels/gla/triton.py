"""GLA block: per-key-dimension forget gate, forward scan from the state, backward in the block.

Two forms, both grid (B, H, Dv tiles), both reading a program's [Dk, Dv_tile] slice of the state
once and writing it once (element by element from the old one, so new_state may be state):
**chunk** (`chunk.py`, the default from G = 4), the block in matrix form on tensor cores in
sub-chunks of 16 rows; **scan** (`scan.py`, any G), the G tokens stepped twice in fp32
registers. This module holds the launch choices and the launcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from fsc.kernels import _common
from fsc.kernels.gla.chunk import _gla_chunk_kernel
from fsc.kernels.gla.scan import _gla_kernel


@dataclass(frozen=True)
class Tuning(_common.Choices):
    """Launch choices (`tools.gpucheck` tries others; `_common.tuned` swaps them)."""

    LEAST_BLOCK: ClassVar[int] = 1  # the scan takes any width (the chunk form raises it to 16)
    form: str = "auto"  # "chunk", "scan", or "auto": see form()
    block_v: int | None = None  # value columns a program (a power of two); None: see block_v()
    num_warps: int | None = None  # None: 4 for the scan; 4 or 8 for the chunk form
    num_stages: int | None = None  # software pipelining of the chunk form; None: Triton's


TUNING = _common.from_env("gla", Tuning())
# Alternatives `tools.gpucheck` times (changes to TUNING): both forms.
TRIALS = [
    {"form": "scan", "block_v": v, "num_warps": w} for v in (8, 16, 32) for w in (1, 2, 4)
] + [
    {"form": "chunk", "block_v": v, "num_warps": w, "num_stages": st}
    for v in (16, 32, 64, 128)
    for w in (4, 8)
    for st in (1, 3)
]
SUB = 16  # rows of a sub-chunk in the chunk form (tl.dot wants >= 16)
KC = 16  # key columns a step of its exact in-sub-chunk part


def form(G: int, Dk: int) -> str:
    """Which kernel runs: the `Tuning` choice, or for "auto" the chunk form once a block has
    4 tokens (shorter ones are a few sequential steps) and Dk <= 256 (its [Dk, block_v] state
    tile and [16, Dk] sub-chunk tiles stay in registers)."""
    if TUNING.form == "scan" or _common.pow2(Dk) > 256:
        return "scan"
    return "chunk" if TUNING.form == "chunk" or G >= 4 else "scan"


def block_v(B: int, H: int, Dv: int, sms: int, kind: str = "scan") -> int:
    """Value columns a program. The scan: 32, halved (down to 8) while the grid would give
    fewer than two programs an SM; a program steps through the block token by token, so at
    small B the GPU is filled by more, narrower programs (one sequence of the 3B shapes, 20
    heads and Dv 128, gets 8 columns: 320 programs on 132 SMs rather than 80). The chunk form:
    64, halved down to 16 (tl.dot's least) the same way."""
    lo = 16 if kind == "chunk" else 1  # the chunk form's tl.dot takes >= 16 columns
    width = _common.pow2(Dv, lo=lo)
    if TUNING.block_v is not None:
        return max(min(width, TUNING.block_v), lo)
    widest, least = (64, 16) if kind == "chunk" else (32, 8)
    return _common.narrow(min(width, widest), least, lambda bv: B * H * _common.cdiv(Dv, bv), sms)


def gla_block(q, k, v, gk, state, scale: float, new_state=None):
    """Triton twin of `gla_block_ref` (same shapes; output in q.dtype)."""
    op = "gla_block"
    dev = _common.check(
        op, {"q": q, "k": k, "v": v, "gk": gk, "state": state, "new_state": new_state}
    )
    B, G, H, Dk = q.shape
    Dv = v.shape[-1]
    _common.expect_shape(op, "k", k, (B, G, H, Dk))
    _common.expect_shape(op, "v", v, (B, G, H, Dv))
    _common.expect_shape(op, "gk", gk, (B, G, H, Dk))
    _common.expect_shape(op, "state", state, (B, H, Dk, Dv))
    _common.expect_shape(op, "new_state", new_state, (B, H, Dk, Dv))
    out = _common.empty((B, G, H, Dv), q.dtype, dev)
    if B * H * Dk * Dv == 0:
        return out
    kind = form(G, Dk)
    bv = block_v(B, H, Dv, _common.sm_count(dev), kind)
    ns = new_state if new_state is not None else state
    strides = _common.strides(q, k, v, gk, state, out, ns)
    grid = (B, H, _common.cdiv(Dv, bv))
    block_k = _common.pow2(Dk)
    with _common.device_guard(dev):
        if kind == "chunk":
            ob = _common.empty(out.shape, torch.float32, dev)  # pass 1's backward part, same strides
            _gla_chunk_kernel[grid](
                q, k, v, gk, state, out, ns, ob, G, Dk, Dv, float(scale), *strides,
                BLOCK_K=block_k, BLOCK_V=bv, SUB=SUB, KC=min(KC, block_k),
                WRITE=new_state is not None, PRECISION=_common.dot_precision(q.dtype),
                num_warps=TUNING.num_warps or _common.warps(block_k * bv),
                **({"num_stages": TUNING.num_stages} if TUNING.num_stages else {}),
            )
        else:
            _gla_kernel[grid](
                q, k, v, gk, state, out, ns, G, Dk, Dv, float(scale), *strides,
                BLOCK_G=_common.pow2(G), BLOCK_K=block_k, BLOCK_V=bv,
                WRITE=new_state is not None, num_warps=TUNING.num_warps or 4,
            )
    return out
