"""Op dispatch: the Triton kernel on CUDA tensors, the pure-torch reference elsewhere.

The ops are the folders of fsc.kernels (`op_folders`): `call(op, *args)` runs `op` with the
reference's signature. `use_backend("auto" | "torch" | "triton")` picks the policy; `ran`
records which backend each op actually ran last, so profile rows can say what they timed.
"triton" on CPU tensors needs the Triton interpreter (TRITON_INTERPRET=1 set before fsc.kernels
are imported).
"""

from __future__ import annotations

import importlib
import os
from contextlib import contextmanager

import torch

from fsc.errors import KernelError
from fsc.kernels import op_folders

BACKENDS = ("auto", "torch", "triton")
FOLDERS = op_folders()  # op name -> folder under fsc.kernels
# op name -> its reference (the spec; runs anywhere)
REFERENCES = {op: getattr(importlib.import_module(f"fsc.kernels.{folder}.reference"), f"{op}_ref")
              for op, folder in FOLDERS.items()}

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
    module = f"fsc.kernels.{FOLDERS[op]}.triton"
    try:
        return getattr(importlib.import_module(module), op)
    except ModuleNotFoundError as e:
        if e.name == module:
            return None
        raise


def call(op: str, *args, **kwargs):
    """Run `op` on `args` (the reference's signature) with the backend the policy picks for
    the device of its first tensor."""
    if op not in REFERENCES:
        raise KernelError(f"no op {op!r}; ops: {', '.join(REFERENCES)}")
    device_type = next(a for a in args if isinstance(a, torch.Tensor)).device.type
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
    return REFERENCES[op](*args, **kwargs)
