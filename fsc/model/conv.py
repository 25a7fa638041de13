"""The short causal depthwise conv (then SiLU) that Mamba-2 and Gated DeltaNet run before their
scans: its seeded weights and its uncached forms (a whole sequence; the two streams of the
`blocks` objective). The cached block form is the `causal_conv_block` op."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def init_conv(leaf: str, p: torch.Tensor, gen: torch.Generator) -> bool:
    """Seed a conv parameter (weight uniform within 1/sqrt(width), bias within 0.1); False when
    `leaf` names none."""
    if leaf == "conv_weight":
        bound = 1 / math.sqrt(p.shape[-1])
        p.uniform_(-bound, bound, generator=gen)
    elif leaf == "conv_bias":
        p.uniform_(-0.1, 0.1, generator=gen)
    else:
        return False
    return True


def causal_conv(x, weight, bias):
    """SiLU of the depthwise causal conv of x (N, W-1+L, C), its first W-1 rows the window
    before the L tokens; weight [C, W], bias [C] or None. Returns (N, L, C) fp32.

    As W multiply-adds of shifted views (W is a few taps): on the CPU they and their backward
    are faster than a grouped conv1d's (docs/benchmarks.md §8)."""
    x, w = x.float(), weight.float()
    W = w.shape[1]
    L = x.shape[1] - (W - 1)
    y = x[:, :L] * w[:, 0] if bias is None else torch.addcmul(bias.float(), x[:, :L], w[:, 0])
    for k in range(1, W):
        y = torch.addcmul(y, x[:, k : k + L], w[:, k])
    return F.silu(y)


def with_window(x, weight, window=None):
    """x (B, T, C) after the W-1 inputs before it: `window` (B, C, W-1, a cache's conv window)
    or zeros."""
    if window is None:
        return F.pad(x, (0, 0, weight.shape[1] - 1, 0))
    return torch.cat([window.transpose(1, 2).to(x.dtype), x], 1)


def window_after(x, weight, window=None):
    """The conv window a cache holds after x (B, T, C) read after `window` (zeros by default):
    its last W-1 inputs, (B, C, W-1)."""
    keep = weight.shape[1] - 1
    tail = x[:, x.shape[1] - min(keep, x.shape[1]):]  # the last inputs alone, not a padded copy
    if tail.shape[1] < keep:  # a sequence shorter than the window: the window's end before it
        tail = with_window(tail, weight, window)
        tail = tail[:, tail.shape[1] - keep:]
    return tail.transpose(1, 2)


def conv_sequence(x, weight, bias, window=None):
    """The conv over whole sequences x (B, T, C), after `window` (zeros by default): (B, T, C)
    fp32."""
    return causal_conv(with_window(x, weight, window), weight, bias)


def conv_two_stream(x_clean, x_noised, blocks, weight, bias, window=None):
    """The conv of both streams: the clean sequences x_clean (B, T, C) after `window` (B, C, W-1;
    zeros by default), and each of the K noised blocks of G in x_noised (B, K·G, C) continuing
    from the W-1 inputs before the block it stands at (blocks (B, K)). Returns both, fp32."""
    B, K, W = blocks.shape[0], blocks.shape[1], weight.shape[1]
    G = x_noised.shape[1] // K
    padded = with_window(x_clean, weight, window)  # (B, W-1+T, C)
    rows = torch.arange(B, device=blocks.device)[:, None, None]
    window = padded[rows, blocks[..., None] * G + torch.arange(W - 1, device=blocks.device)]
    full = torch.cat([window, x_noised.unflatten(1, (K, G))], 2).flatten(0, 1)  # (B·K, W-1+G, C)
    return (causal_conv(padded, weight, bias),
            causal_conv(full, weight, bias).reshape(B, K * G, -1))
