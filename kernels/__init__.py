"""fsc.kernels: decode-time ops, each a Triton kernel beside its pure-torch reference.

Every op folder has `reference.py` (the spec, runs anywhere) and, where written, `triton.py`
(the fast path, CUDA or the Triton interpreter) with the same signature. `fsc.ops` dispatches.
Layout everywhere: `[B, T, H, D]` (batch, tokens, heads, head dim).
"""

import functools
import importlib
import pkgutil

# Launch choices of the Triton kernels, e.g. "attention.block_n=128,gla.form=scan" (read by
# _common.from_env; here so that recording it imports neither torch nor triton).
TUNING_ENV = "FSC_KERNEL_TUNING"


@functools.cache
def op_folders() -> dict[str, str]:
    """{op name: folder} of every op folder here: each declares `OP` in its __init__.py, with
    `reference.<OP>_ref` beside it and, where written, `triton.<OP>`. Imports neither torch
    nor triton. Found once a process (the folders do not change while it runs); do not
    modify the returned dict."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            found[importlib.import_module(f"{__name__}.{info.name}").OP] = info.name
    return found
