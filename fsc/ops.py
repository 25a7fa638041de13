"""Op dispatch: the Triton kernel on CUDA tensors, the pure-torch reference elsewhere.

`use_backend("auto" | "torch" | "triton")` picks the policy; `ran` records which backend each op
actually ran last, so profile rows can say what they timed. "triton" on CPU tensors needs the
Triton interpreter (TRITON_INTERPRET=1 set before fsc.kernels are imported).
"""

from __future__ import annotations

import importlib
import os
from contextlib import contextmanager

from fsc.errors import KernelError
from fsc.kernels.attention.reference import block_attention_ref
from fsc.kernels.conv.reference import causal_conv_block_ref
from fsc.kernels.gla.reference import gla_block_ref
from fsc.kernels.linear.reference import linear_block_ref
from fsc.kernels.mamba.reference import mamba_block_scan_ref

BACKENDS = ("auto", "torch", "triton")

# op name -> (reference, module and function of the Triton launcher)
_OPS = {
    "block_attention": (block_attention_ref, "fsc.kernels.attention.triton", "block_attention"),
    "causal_conv_block": (causal_conv_block_ref, "fsc.kernels.conv.triton", "causal_conv_block"),
    "mamba_block_scan": (mamba_block_scan_ref, "fsc.kernels.mamba.triton", "mamba_block_scan"),
    "linear_block": (linear_block_ref, "fsc.kernels.linear.triton", "linear_block"),
    "gla_block": (gla_block_ref, "fsc.kernels.gla.triton", "gla_block"),
}

_backend = "auto"
ran: dict[str, str] = {}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def use_backend(name: str) -> None:
    global _backend
    if name not in BACKENDS:
        raise KernelError(f"backend {name!r} is not one of {', '.join(BACKENDS)}")
    _backend = name


@contextmanager
def backend(name: str):
    old = _backend
    use_backend(name)
    try:
        yield
    finally:
        use_backend(old)


def triton_impl(op: str):
    """The Triton launcher of `op`, or None when none is written yet."""
    _, module, fn = _OPS[op]
    try:
        return getattr(importlib.import_module(module), fn)
    except ModuleNotFoundError as e:
        if e.name == module:
            return None
        raise


def _call(op: str, device_type: str, *args, **kwargs):
    ref = _OPS[op][0]
    want = _backend
    if want == "auto":
        want = "triton" if device_type == "cuda" and triton_impl(op) is not None else "torch"
    if want == "triton":
        fn = triton_impl(op)
        if fn is None:
            raise KernelError(f"no Triton kernel for {op} yet; use --backend torch or auto")
        if device_type != "cuda" and not interpreting():
            raise KernelError(
                f"the Triton backend needs a CUDA device (or TRITON_INTERPRET=1) for {op}"
            )
        ran[op] = "triton"
        return fn(*args, **kwargs)
    ran[op] = "torch"
    return ref(*args, **kwargs)


def block_attention(q, k_cache, v_cache, k_blk, v_blk, S, scale):
    return _call("block_attention", q.device.type, q, k_cache, v_cache, k_blk, v_blk, S, scale)


def causal_conv_block(x, window, weight, bias, new_window=None):
    return _call("causal_conv_block", x.device.type, x, window, weight, bias, new_window)


def mamba_block_scan(x, dt, dt_bias, A, Bm, Cm, D, z, state, new_state=None):
    return _call("mamba_block_scan", x.device.type, x, dt, dt_bias, A, Bm, Cm, D, z, state, new_state)


def linear_block(q, k, v, state, z_state, feature_map, eps, new_state=None, new_z=None):
    return _call(
        "linear_block", q.device.type, q, k, v, state, z_state, feature_map, eps, new_state, new_z
    )


def gla_block(q, k, v, gk, state, scale, new_state=None):
    return _call("gla_block", q.device.type, q, k, v, gk, state, scale, new_state)
