"""The weights' memory layout for decoding on a CPU: each projection matrix stored by columns.

A decoding step multiplies one token's vector by every weight matrix, reading each once: the
step is bound by how fast those bytes stream from memory. A linear layer's weight is [out, in];
`F.linear(x, W)` computes x · Wᵀ. With W stored row by row (PyTorch's default) the BLAS runs a
dot product per output row; stored column by column (Wᵀ contiguous, the same values and shape),
it runs the x · Wᵀ product over contiguous rows of Wᵀ, which streams faster on the CPU measured
here (one thread, Qwen3-0.6B's 196 matrices and head: 20.0 against 15.4 GB/s, `python -m
tools.bench_layout`; benchmarks §17). The same layout is slower for a pass of several tokens
(8 tokens: ~10 %; 64: ~5 %), so only a caller that steps one token at a time asks for it.

Only the layout changes: values, shapes, state_dict keys and the files a save writes stay the
same (a save writes contiguous tensors). Rounding may differ in the last bits from the row
layout, so a model is converted once, as it is loaded for one-token decoding
(`fsc.loading.load_model(..., one_token_steps=True)`: `fsc decode --mode ar`), and every pass
of that model (step, fold, prefill, the uncached reference) then reads the same tensors.
Training keeps the row layout: a resumed run must reach the uninterrupted run's tensors bit
for bit.
"""

from __future__ import annotations

import torch
from torch import nn


def by_columns(model: nn.Module) -> nn.Module:
    """Store `model`'s linear weights (and a tied embedding, which is also the head) by columns,
    in place; returns the model. A no-op off the CPU."""
    head = getattr(model, "lm_head", "untied") is None  # tied: the embedding is the head
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Linear) or (head and module is getattr(model, "embed", None)):
                w = module.weight
                if w.device.type == "cpu" and w.dim() == 2 and w.stride(0) != 1:
                    w.data = w.data.t().contiguous().t()
    return model
