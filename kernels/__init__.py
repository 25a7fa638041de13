"""fsc.kernels: decode-time ops, each a Triton kernel beside its pure-torch reference.

Every op folder has `reference.py` (the spec, runs anywhere) and, where written, `triton.py`
(the fast path, CUDA or the Triton interpreter) with the same signature. `fsc.ops` dispatches.
Layout everywhere: `[B, T, H, D]` (batch, tokens, heads, head dim).
"""
