"""A step replayed as a CUDA graph: the GPU's work issued at once instead of op by op.

At decode batch sizes a step of a 3B model is a thousand small kernels whose issuing from Python
costs more than running them (`tools/gpu_step_probe.py` on an H200, S 4096, B 1: mamba_3b's
step takes 31.8 ms eager against 3.5 ms of kernel time; replayed from a graph, 4.3 ms with the
same logits to the bit). A step against a cache whose length has not changed does the same work
on the same tensors each time (the caches are preallocated and written in place), so it is
captured once and replayed: the K denoising steps of a block share one capture, and `fsc
profile` replays the step (and the fold, rewound) it times.

What a capture depends on is its key: the cache object and its length, and the shape and dtype
of the tokens. Anything else a step reads must not change between replays without one of these
changing too; within a decode that holds (only a fold changes the cache, and it changes the
length). A cache of fixed states (Mamba-2, linear attention, GLA, Gated DeltaNet) is read by a step
through its tensors only, which a fold updates in place; attention reads its length on the
device once the cache is made static (`make_static`: the whole cache masked at the length, the
block written at it). Where every layer is so (and there is no logit shift), nothing of a step
depends on the length: the length leaves the key, and one capture serves every block of a
decode (`length_free`); the fold is replayed the same way (`GraphedFold`), so that neither the
K steps nor the fold of a block, nor an AR token's fold, is issued from Python (a whole
denoising step, its pick and reveal too, is fsc.decode.denoise's capture). The output a replay returns
is the graph's own tensor, overwritten by the next replay: read it (or copy it) before calling
again.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fsc.errors import UsageError


def usable(device) -> bool:
    """Whether steps on `device` can be captured: CUDA only (the CPU runs every op eagerly)."""
    return torch.device(device).type == "cuda" and torch.cuda.is_available()


def capture(fn: Callable[[], torch.Tensor | None], warm: bool = True):
    """(graph, output): `fn`'s GPU work captured once. With `warm`, `fn` first runs once on a side
    stream, as CUDA graphs need for lazily initialised state (cuBLAS workspaces, Triton's
    compiled kernels)."""
    if warm:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            out = fn()
    except RuntimeError as e:  # torch.AcceleratorError is one
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"this step cannot be replayed from a CUDA graph ({first}); "
                         f"run with --no-graphs") from e
    return graph, out


def length_free(model, cache) -> bool:
    """Whether a step (and a fold) of `model` on `cache` does the same work on the same tensors
    at every cache length: every layer a fixed state, or attention in its static form (its
    length on the device: `make_static`; a sliding window's ring is not), and no logit shift
    (its first position reads the last folded hidden, a tensor a fold replaces), and no decay
    read by position (`mamba.decay_from`: its rates change with the length)."""
    return not model.recipe.logit_shift and not model.recipe.decays_by_position and all(
        c.kind != "attention" or c.at is not None for c in cache.layers)


STATIC_MAX = 1 << 15  # the largest KV cache (tokens) `make_static` reads whole at every step


def make_static(model, cache) -> bool:
    """Whether `model` on `cache` can be made `length_free`, made so: its attention layers
    read their length on the device from now on (`LayerCache.at`; `Attention._static_block`:
    a step reads the whole cache, masked at the length, so its work is the same at every
    length). Before a decode's first step, after the prompt is folded. A cache that cannot be
    made so is left as it is (a sliding window's ring, a logit shift, a decay read by
    position), and so is one above STATIC_MAX tokens of capacity: there the masked read of the
    whole cache (torch's attention, not the split-KV kernel) would cost more than a capture a
    block saves, until the kernel reads its length on the device too."""
    attention = [c for c in cache.layers if c.kind == "attention"]
    if (model.recipe.logit_shift or model.recipe.decays_by_position
            or any(not c.growing or c.capacity > STATIC_MAX for c in attention)):
        return length_free(model, cache)
    for c in attention:
        c.at = torch.tensor([c.length], device=c.tensors["k"].device)
    return True


class GraphedStep:
    """`model(tokens, cache)` replayed from a CUDA graph while the key (the tokens' shape and
    dtype) and the cache are unchanged, and its length too unless the step is `length_free`;
    recaptured when one changes (by this module's `capture`, looked up at each capture: a test
    without a GPU swaps in a stand-in)."""

    def __init__(self, model):
        self.model = model
        self._key = None
        self._cache = None  # held, so that the graph's tensors stay allocated
        self._length = None  # the length captured at; None: any (length-free)
        self._graph = None
        self._tokens = None
        self._out = None
        self._warm = True
        self.captures = 0
        self.replays = 0

    def __call__(self, tokens: torch.Tensor, cache) -> torch.Tensor:
        key = (tuple(tokens.shape), tokens.dtype, tokens.device)
        if (cache is not self._cache or key != self._key
                or self._length not in (None, cache.length)):
            self._graph = self._out = self._cache = None  # the old capture's memory goes first
            self._tokens = tokens.clone()
            self._graph, self._out = capture(lambda: self.model(self._tokens, cache), self._warm)
            self._warm = False
            self._length = None if length_free(self.model, cache) else cache.length
            self._key, self._cache = key, cache
            self.captures += 1
        else:
            self._tokens.copy_(tokens)
        self._graph.replay()
        self.replays += 1
        return self._out


class GraphedFold(GraphedStep):
    """`model.fold(tokens, cache)` replayed from a CUDA graph, for a `length_free` model: the
    fold writes its states in place and reads nothing that depends on the length, so one
    capture serves every fold of a decode of one block shape (AR: every token). Capturing
    runs the fold on a side stream first (the warm-up), so the cache is saved before and put
    back after; each replay folds for real, and the lengths (Python's, which a replay does not
    run) are set after it. (A GraphedStep's bookkeeping, a fold's capture and replay.)"""

    def __call__(self, tokens: torch.Tensor, cache) -> torch.Tensor:
        key = (tuple(tokens.shape), tokens.dtype, tokens.device)
        S = cache.length
        if cache is not self._cache or key != self._key:  # (a fold is always length-free)
            assert length_free(self.model, cache), (
                "a fold replays only where its step is length-free")
            self._graph = self._out = self._cache = None
            self._tokens = tokens.clone()
            # a state and the device length as they were (a KV cache's slots past the length
            # are written again by the real fold)
            saved = [{k: t.clone() for k, t in (c.tensors | {"at": c.at}).items()
                      if t is not None and (k == "at" or not c.growing)} for c in cache.layers]
            self._graph, self._out = capture(lambda: self.model.fold(self._tokens, cache),
                                             self._warm)
            for c, held in zip(cache.layers, saved, strict=True):  # as before the capture
                for k, t in held.items():
                    (c.at if k == "at" else c.tensors[k]).copy_(t)
            self._warm = False
            self._key, self._cache = key, cache
            self.captures += 1
        else:
            self._tokens.copy_(tokens)
        self._graph.replay()
        cache.set_length(S + tokens.shape[1])
        self.replays += 1
        return self._out
