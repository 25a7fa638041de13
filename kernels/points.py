"""Kernel inputs and byte counts shared by the GPU check and `fsc verify --backend triton`.

Each `Point` is one op at one shape: how to run the Triton kernel and the torch reference on the
same random inputs, the bytes the op must move, and (for attention and folds) an accuracy check
of the kernel against the fp32 reference. Shapes are plain dicts: `SHAPES_DRY` here, the 3B ones from the
recipes in tools/gpucheck.py.

Importing this module imports no Triton launcher (each is imported when its points are made), so
a caller may still set TRITON_INTERPRET after importing it, as `tools.gpucheck --dry-run` does.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from fsc.kernels import op_folders
from fsc.kernels.attention.reference import block_attention_ref

from fsc.accuracy import worst_error

# Tiny shapes for the interpreter and the GPU self-check; G 20 spans two of GLA's 16-row
# sub-chunks (and one partial).
SHAPES_DRY = {"G": 20, "heads": 4, "kv_heads": 2, "head_dim": 16, "m_heads": 2, "m_head_dim": 16,
              "d_state": 16, "d_conv": 4, "conv_dim": 48}


@dataclass
class Point:
    """One op at one shape: how to run the kernel and its competitors, and what it must move."""

    op: str
    mode: str  # "step" (state read only) or "fold" (new state written)
    B: int
    S: int | None
    bytes: int
    triton: Callable[[], object]
    torch: Callable[[], object]
    sdpa: Callable[[], object] | None = None
    accuracy: Callable[[], dict] | None = None  # -> {"rel_err": .., "state_rel_err": ..}


# -- inputs and byte counts ------------------------------------------------------------------
def _rel(out, ref) -> float:
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-30)).item()


def _upcast(args):
    return [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _accuracy(kernel, ref, args, call=None, states=()):
    """bf16 kernel vs the fp32 reference on the same (upcast) inputs; with `states` (indices
    into args) as a fold, comparing the new states too."""
    call = call or (lambda f, a, new: f(*a, *new))
    got_new = [torch.empty_like(args[i]) for i in states]
    want_new = [torch.empty_like(args[i], dtype=torch.float32) for i in states]
    got, want = call(kernel, args, got_new), call(ref, _upcast(args), want_new)
    errs = {"rel_err": _rel(got, want)}
    if states:
        errs["state_rel_err"] = worst_error(_rel(g, w) for g, w in zip(got_new, want_new))
    return errs


def attention_points(B, S, sh, dtype, device, gen):
    block_attention = importlib.import_module("fsc.kernels.attention.triton").block_attention
    G, H, Hkv, D = sh["G"], sh["heads"], sh["kv_heads"], sh["head_dim"]
    e = torch.empty((), dtype=dtype).element_size()

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=dtype)

    q, kc, vc = rnd(B, G, H, D), rnd(B, S + G, Hkv, D), rnd(B, S + G, Hkv, D)
    kb, vb = rnd(B, G, Hkv, D), rnd(B, G, Hkv, D)
    args = (q, kc, vc, kb, vb, S, 1 / math.sqrt(D))
    k_all = torch.cat([kc[:, :S], kb], 1).transpose(1, 2)  # (B, Hkv, S+G, D), built once
    v_all = torch.cat([vc[:, :S], vb], 1).transpose(1, 2)
    qt = q.transpose(1, 2)
    gqa = {"enable_gqa": True} if H != Hkv else {}

    def accuracy():  # one sequence at a time: the fp32 reference of B = 8 at 256k is large
        errs = [_accuracy(block_attention, block_attention_ref,
                          (q[b:b + 1], kc[b:b + 1], vc[b:b + 1], kb[b:b + 1], vb[b:b + 1], S,
                           args[-1]))["rel_err"] for b in range(B)]
        return {"rel_err": worst_error(errs)}

    return [Point("block_attention", "step", B, S,
                  bytes=B * e * (2 * (S + G) * Hkv * D + 2 * G * H * D),
                  triton=lambda: block_attention(*args), torch=lambda: block_attention_ref(*args),
                  sdpa=lambda: F.scaled_dot_product_attention(qt, k_all, v_all, scale=args[-1], **gqa),
                  accuracy=accuracy)]


def state_points(B, sh, dtype, device, gen):
    """Every op but attention at one batch size, each as a step and as a fold; each op folder's
    `inputs.py` makes its inputs."""
    f32 = torch.float32
    e = torch.empty((), dtype=dtype).element_size()

    def rnd(*shape, dt=None, scale=1.0):
        """Random normal values in the point's dtype, or fp32 (dt="fp32"); never zeros."""
        x = torch.randn(*shape, generator=gen, device=device, dtype=f32) * scale
        return x.to(f32 if dt == "fp32" else dtype)

    def plain(f, a, new):
        return f(*a, *new)

    points = []
    for op, folder in op_folders().items():
        if op == "block_attention":  # S-dependent: attention_points
            continue
        kernel = getattr(importlib.import_module(f"fsc.kernels.{folder}.triton"), op)
        ref = getattr(importlib.import_module(f"fsc.kernels.{folder}.reference"), f"{op}_ref")
        args, call, states, out_elems = importlib.import_module(
            f"fsc.kernels.{folder}.inputs").inputs(B, sh, rnd)
        call = call or plain
        read = sum(_nbytes(a) for a in args)  # every input once (states included)
        out = out_elems * e
        written = sum(_nbytes(args[i]) for i in states)
        new = [torch.empty_like(args[i]) for i in states]
        for mode, outs, extra in (("step", [], 0), ("fold", new, written)):
            points.append(Point(
                op, mode, B, None, read + out + extra,
                triton=lambda k=kernel, a=args, c=call, o=outs: c(k, a, o),
                torch=lambda r=ref, a=args, c=call, o=outs: c(r, a, o),
                accuracy=None if mode == "step" else
                (lambda k=kernel, r=ref, a=args, c=call, st=states: _accuracy(k, r, a, c, st))))
    return points


def _nbytes(t) -> int:
    return t.numel() * t.element_size()
