"""Op dispatch: the Triton kernel on CUDA tensors, the pure-torch reference elsewhere.

The ops are the folders of fsc.kernels (`op_folders`), each called here by its name
(`ops.block_attention(...)`, with its reference's signature; `call(op, *args)` underneath). `use_backend("auto" | "torch" | "triton")` picks the policy; a caller
that needs to know which backend each op actually ran on holds a `trace()` around the work (so
profile rows can say what they timed). "triton" on CPU tensors needs the Triton interpreter
(TRITON_INTERPRET=1 set before fsc.kernels are imported).
"""

from __future__ import annotations

import functools
import importlib
import os
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch

from fsc.errors import KernelError
from fsc.kernels import TUNING_ENV, op_folders
from fsc.kernels.attention.reference import block_attention_ref
from fsc.kernels.conv.reference import causal_conv_block_ref
from fsc.kernels.gated_delta.reference import gated_delta_block_ref
from fsc.kernels.gla.reference import gla_block_ref
from fsc.kernels.linear.reference import linear_block_ref
from fsc.kernels.mamba.reference import mamba_block_scan_ref

BACKENDS = ("auto", "torch", "triton")
FOLDERS = op_folders()  # op name -> folder under fsc.kernels
# op name -> its reference (the spec; runs anywhere)
REFERENCES = {f.__name__.removesuffix("_ref"): f for f in (
    block_attention_ref, causal_conv_block_ref, gated_delta_block_ref, gla_block_ref,
    linear_block_ref, mamba_block_scan_ref)}
assert set(REFERENCES) == set(FOLDERS), "fsc.ops names every kernel folder's reference"

_backend = "auto"


@dataclass
class Trace:
    """What ran inside one `trace()` block: op name -> the backend its last call ran on
    ("triton" | "torch"), in the order the ops first ran."""

    backends: dict[str, str] = field(default_factory=dict)


# The traces open in this context, outermost first: each call is recorded in all of them, so a
# trace sees its nested ones' ops, and callers in other contexts see none of them.
_traces: ContextVar[tuple[Trace, ...]] = ContextVar("fsc_ops_traces", default=())


@contextmanager
def trace():
    """`with trace() as t: ...` records in `t.backends` the backend of every op called in the
    block; outside any trace nothing is recorded."""
    t = Trace()
    token = _traces.set((*_traces.get(), t))
    try:
        yield t
    finally:
        _traces.reset(token)


def _record(op: str, backend_name: str) -> None:
    for t in _traces.get():
        t.backends[op] = backend_name


def ran_torch(op: str) -> None:
    """Record in the open traces that `op`'s work ran in torch by a path of the caller's own,
    not through `call` (attention's ragged and static steps: a masked
    scaled_dot_product_attention), so that a trace names what ran."""
    _record(op, "torch")


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


@functools.cache  # (`call` asks on every op call: a dict lookup after the first)
def triton_impl(op: str):
    """The Triton launcher of `op`, or None when none is written yet (imported at its first
    call: Triton loads only where a kernel runs, after TRITON_INTERPRET is read)."""
    module = f"fsc.kernels.{FOLDERS[op]}.triton"
    try:
        return getattr(importlib.import_module(module), op)
    except ModuleNotFoundError as e:
        if e.name == module:
            return None
        raise


def check_tuning() -> None:
    """TuningError for a $FSC_KERNEL_TUNING that names a kernel, choice or value no kernel
    takes. A kernel reads the variable as its module loads, which a run on the torch backend
    never does; a run that records the variable checks it against every kernel's choices
    first (read afresh: a module loaded before the variable was set read none)."""
    if not os.environ.get(TUNING_ENV):
        return
    common = importlib.import_module("fsc.kernels._common")
    for op, folder in FOLDERS.items():
        if triton_impl(op) is not None:
            module = importlib.import_module(f"fsc.kernels.{folder}.triton")
            common.from_env(folder, type(module.TUNING)())


def _auto(op: str, device_type: str, args) -> str:
    """The backend `auto` picks: the Triton kernel on CUDA where one is written and holds the
    inputs (a kernel that keeps a whole block in one tile, `max_block`, takes blocks
    [B, G, ...] of at most that many tokens), else the reference."""
    fn = triton_impl(op) if device_type == "cuda" else None
    if fn is None or args[0].shape[1] > getattr(fn, "max_block", args[0].shape[1]):
        return "torch"
    return "triton"


def call(op: str, *args, **kwargs):
    """Run `op` on `args` (the reference's signature) with the backend the policy picks for
    the device of its first tensor."""
    if op not in REFERENCES:
        raise KernelError(f"no op {op!r}; ops: {', '.join(REFERENCES)}")
    device_type = next(a for a in args if isinstance(a, torch.Tensor)).device.type
    want = _backend
    if want == "auto":
        want = _auto(op, device_type, args)
    if want == "triton":
        fn = triton_impl(op)
        if fn is None:
            raise KernelError(f"no Triton kernel for {op} yet; use --backend torch or auto")
        if device_type != "cuda" and not interpreting():
            raise KernelError(
                f"the Triton backend needs a CUDA device (or TRITON_INTERPRET=1) for {op}"
            )
        _record(op, "triton")
        return fn(*args, **kwargs)
    _record(op, "torch")
    return REFERENCES[op](*args, **kwargs)


# The ops by name, so that a mixer's call of its kernel reads (and is found) as one: each takes
# its reference's arguments (kernels/<folder>/reference.py) and runs where `call` picks.
def block_attention(*args, **kwargs):
    return call("block_attention", *args, **kwargs)


def causal_conv_block(*args, **kwargs):
    return call("causal_conv_block", *args, **kwargs)


def gated_delta_block(*args, **kwargs):
    return call("gated_delta_block", *args, **kwargs)


def gla_block(*args, **kwargs):
    return call("gla_block", *args, **kwargs)


def linear_block(*args, **kwargs):
    return call("linear_block", *args, **kwargs)


def mamba_block_scan(*args, **kwargs):
    return call("mamba_block_scan", *args, **kwargs)
