"""Caches: what a mixer keeps of the finished prefix, and the model-level cache around them."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fsc.costmodel.shapes import CacheBytes


@dataclass
class LayerCache:
    """One layer's cache. `tensors` are preallocated; `length` is S, the tokens folded so far.

    attention: k, v        [B, capacity, Hkv, D]      (grows with S)
    mamba:     conv [B, C, W-1], ssm [B, H, P, N]     (fixed)
    linear:    state [B, H, r, Dv], z [B, H, r]       (fixed)
    gla:       state [B, H, Dk, Dv]                   (fixed)
    gated_delta: state [B, H, Dk, Dv], with a conv also conv [B, C, W-1]  (fixed)
    """

    kind: str
    tensors: dict[str, torch.Tensor]
    length: int = 0
    growing: bool = False
    pads: torch.Tensor | None = None  # [B] long: the rows begin this late (ragged; a growing
    # cache's keys are padded so, a fixed state's positions count from there)
    # [1] long on the cache's device: the length again, for a step and fold that read it there
    # (attention's static form, which one CUDA graph serves at every length: fsc.graphs)
    at: torch.Tensor | None = None

    def positions(self, G: int):
        """The positions of a block of G tokens after this cache: a range, or (B, G) counted
        from each row's own start where the rows are ragged (`pads`)."""
        S = self.length
        if self.pads is None:
            return range(S, S + G)
        return torch.arange(S, S + G, device=self.pads.device)[None] - self.pads[:, None]

    @property
    def capacity(self) -> int | None:
        return self.tensors["k"].shape[1] if self.growing else None

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())


@dataclass
class ModelCache:
    """Per-layer caches plus S and the block size G the cache was built for; for a model with
    the logit shift (`Recipe.logit_shift`), also the final hidden state of the last token
    folded, which the next block's first position reads its logits from (B × d_model values,
    left out of `nbytes` and the cost model's sizes: a few KiB beside any layer's state)."""

    layers: list[LayerCache]
    block_size: int
    batch: int
    length: int = 0
    last_hidden: torch.Tensor | None = None  # [B, d_model], after the final norm; shift only

    def set_length(self, S: int) -> None:
        """S tokens folded, in the model's cache and every layer's (a fold replayed from a CUDA
        graph runs no Python to count them; a profile's fold is rewound)."""
        self.length = S
        for c in self.layers:
            c.length = S

    def nbytes(self) -> CacheBytes:
        """Bytes allocated: the growing (KV) and fixed (state) layers' tensors."""
        kv = sum(c.nbytes() for c in self.layers if c.growing)
        state = sum(c.nbytes() for c in self.layers if not c.growing)
        return CacheBytes(kv, state)


@dataclass
class Carry:
    """State passing (`fsc train --state-passing`): a training forward whose fixed-state layers
    start from `start` (per layer, the cache tensors a fold of another sequence left; None: an
    empty cache) and leave in `end` the tensors a fold of this sequence would. Attention layers
    start empty and leave None: a sequence's attention reads that sequence alone."""

    start: list[dict[str, torch.Tensor] | None]
    end: list[dict[str, torch.Tensor] | None] = field(default_factory=list)

    def detached(self) -> list[dict[str, torch.Tensor] | None]:
        """`end`, cut from the graph: the next forward's `start`."""
        return [None if e is None else {k: v.detach() for k, v in e.items()} for e in self.end]


def copy_cache(cache: ModelCache, batch: int | None = None) -> ModelCache:
    """A copy of `cache` that folds and steps on its own; with `batch`, each of its (one)
    sequences repeated `batch` times (many reads against one folded prefix)."""
    if batch is not None and cache.batch != 1:
        raise ValueError(f"only a cache of one sequence repeats; this one holds {cache.batch}")
    n = cache.batch if batch is None else batch

    def copied(t: torch.Tensor) -> torch.Tensor:
        return t.clone() if batch is None else t.repeat(batch, *([1] * (t.dim() - 1)))

    layers = [LayerCache(c.kind, {k: copied(t) for k, t in c.tensors.items()}, c.length, c.growing,
                         None if c.pads is None else copied(c.pads))
              for c in cache.layers]
    last = None if cache.last_hidden is None else copied(cache.last_hidden)
    return ModelCache(layers, cache.block_size, n, cache.length, last)


def merge_rows(caches: list[ModelCache], capacity: int) -> ModelCache:
    """One cache of len(caches) rows from caches of one row each, folded alone to lengths of
    their own: a fixed state is its row's as it is; a growing (KV) cache holds each row's
    prefix right-aligned at the longest length S, its first S − length positions padding that
    `pads` tells the attention to skip (and to count positions from). Room for `capacity`
    tokens in all. A fixed state's layer keeps `pads` too: a mixer that reads positions
    (`mamba.decay_from`) counts each row's from its own start."""
    S = max(c.length for c in caches)
    first = caches[0]
    device = next(iter(first.layers[0].tensors.values())).device
    pads = torch.tensor([S - c.length for c in caches], device=device)
    layers = []
    for i, lc in enumerate(first.layers):
        rows = [c.layers[i] for c in caches]
        if not lc.growing:
            tensors = {k: torch.cat([r.tensors[k] for r in rows]) for k in lc.tensors}
            layers.append(LayerCache(lc.kind, tensors, S, False, pads))
            continue
        tensors = {}
        for k, t in lc.tensors.items():
            merged = t.new_zeros((len(rows), capacity, *t.shape[2:]))
            for b, (r, c) in enumerate(zip(rows, caches, strict=True)):
                merged[b, S - c.length : S] = r.tensors[k][0, : c.length]
            tensors[k] = merged
        layers.append(LayerCache(lc.kind, tensors, S, True, pads))
    last = (None if first.last_hidden is None
            else torch.cat([c.last_hidden for c in caches]))
    return ModelCache(layers, first.block_size, len(caches), S, last)
