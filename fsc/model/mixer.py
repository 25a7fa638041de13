"""The mixer contract every sequence mixer implements (the paper's unified interface)."""

from __future__ import annotations

import torch
from torch import nn

from fsc.model.cache import LayerCache
from fsc.model.layers import init_parameter


class Mixer(nn.Module):
    """A sequence mixer over the frontier block `x` [B, G, d_model] against a prefix cache.

    forward(x, cache)  -> [B, G, d_model], never mutates the cache (a denoising step).
    fold(x, cache)     -> the same output, and writes the block into the cache.
    forward_blockwise(x, block_lengths) -> [B, T, d_model]: the uncached block-causal forward
        over a whole sequence (the training path and the exactness reference).
    forward_two_stream(x_clean, x_noised, blocks) -> (y_clean, y_noised): the clean sequence
        block-causally, and K noised blocks per sequence, each read against the clean blocks
        before it (the `blocks` objective: every block a frontier in one forward).

    `backend` says what those two training forms run on: `torch` (the chunked forms), or `fla`
    (flash-linear-attention's kernels, fsc/model/fla_scan.py) for a mixer that lists it in
    `backends` (each of the four fixed-state kinds declares it; a kind added later trains on
    torch until it writes an fla form).
    """

    kind: str = ""
    growing: bool = False
    carries: bool = False  # its training forms start from a passed state (`..._from`)
    backends: tuple[str, ...] = ("torch",)
    backend: str = "torch"

    def __init__(self, d_model: int, dtype: torch.dtype, state_dtype: torch.dtype):
        super().__init__()
        self.d_model = d_model
        self.act_dtype = dtype
        self.state_dtype = state_dtype

    def forward(self, x, cache: LayerCache):
        return self._block(x, cache, commit=False)

    def fold(self, x, cache: LayerCache):
        out = self._block(x, cache, commit=True)
        cache.length += x.shape[1]
        return out

    def fold_blocks(self, x, block_lengths: list[int], cache: LayerCache):
        """Several blocks folded at once (a prompt's prefill): x [B, T, d_model] cut into
        `block_lengths`; the outputs of `fold` on each block in turn, concatenated, and the
        cache as those folds leave it. This is the reference (one fold per block); a mixer
        overrides it with one pass."""
        out, at = [], 0
        for n in block_lengths:
            out.append(self.fold(x[:, at : at + n], cache))
            at += n
        return torch.cat(out, 1)

    # -- per mixer ------------------------------------------------------------------------------
    def cache_shapes(self, batch: int, capacity: int) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        raise NotImplementedError

    def _block(self, x, cache: LayerCache, commit: bool):
        raise NotImplementedError

    def forward_blockwise(self, x, block_lengths: list[int]):
        raise NotImplementedError

    def forward_two_stream(self, x_clean, x_noised, blocks):
        """x_clean [B, T, d_model] (blocks of G), x_noised [B, K·G, d_model]: K noised blocks,
        the k-th standing at block blocks[b, k] (B, K) of sequence b. Returns y_clean
        [B, T, d_model] (`forward_blockwise`) and y_noised [B, K·G, d_model]: each noised block
        as a `step` of it against a cache of the clean blocks before it.

        This is the reference (one `forward_blockwise` per noised block); a mixer overrides it
        with a form batched over the blocks."""
        return self.forward_two_stream_loop(x_clean, x_noised, blocks)

    def forward_two_stream_loop(self, x_clean, x_noised, blocks):
        B, T, _ = x_clean.shape
        K = blocks.shape[1]
        G = x_noised.shape[1] // K
        y_noised = torch.empty_like(x_noised)
        for b in range(B):
            for k in range(K):
                j = int(blocks[b, k])
                seq = torch.cat([x_clean[b : b + 1, : j * G], x_noised[b : b + 1, k * G : (k + 1) * G]], 1)
                y_noised[b, k * G : (k + 1) * G] = self.forward_blockwise(seq, [G] * (j + 1))[0, j * G :]
        return self.forward_blockwise(x_clean, [G] * (T // G)), y_noised

    def forward_blockwise_from(self, x, block_lengths: list[int], start: dict | None, at: int = 0):
        """(`forward_blockwise` of x after a prefix of `at` tokens that left this mixer's cache
        tensors `start` (None: an empty cache), the tensors a fold of the prefix and then x
        would leave). The training forms of state passing (`fsc train --state-passing`): a
        mixer whose state is fixed implements them (`carries`). `at` matters only to a mixer
        that reads positions (Mamba with `mamba.decay_from`); state passing starts each
        sequence at 0."""
        raise NotImplementedError(f"{self.kind} layers do not start from a passed state")

    def forward_two_stream_from(self, x_clean, x_noised, blocks, start: dict | None):
        """(y_clean, y_noised, end): `forward_two_stream` after a prefix that left `start`, and
        the tensors the clean stream's fold would leave (see `forward_blockwise_from`)."""
        raise NotImplementedError(f"{self.kind} layers do not start from a passed state")

    def init_parameter(self, leaf: str, p: torch.Tensor, gen: torch.Generator) -> None:
        """Seeded initial value of this mixer's parameter `leaf` (see fsc.model.lm.init_weights)."""
        init_parameter(leaf, p, gen)

    def _synthetic_fill(self, name: str, t: torch.Tensor, generator) -> None:
        t.normal_(0.0, 1.0, generator=generator)

    # -- shared ---------------------------------------------------------------------------------
    def empty_cache(self, batch: int, capacity: int, device) -> LayerCache:
        tensors = {
            name: torch.zeros(shape, dtype=dt, device=device)
            for name, (shape, dt) in self.cache_shapes(batch, capacity).items()
        }
        return LayerCache(self.kind, tensors, 0, self.growing)

    def synthetic_cache(self, batch: int, S: int, device, generator=None, capacity=None) -> LayerCache:
        """A cache that looks like S finished tokens: random values, never zeros."""
        capacity = S if capacity is None else capacity
        cache = self.empty_cache(batch, capacity, device)
        for name, t in cache.tensors.items():
            view = t[:, :S] if self.growing else t
            self._synthetic_fill(name, view, generator)
        cache.length = S
        return cache

    def cache_bytes(self, batch: int, S: int) -> int:
        """Exact bytes of a cache holding S tokens (capacity S)."""
        total = 0
        for shape, dt in self.cache_shapes(batch, S).values():
            n = 1
            for s in shape:
                n *= s
            total += n * torch.empty((), dtype=dt).element_size()
        return total


class FixedState(Mixer):
    """A mixer whose cache is a state of fixed size, whatever the prefix length (Mamba, linear
    attention, GLA, Gated DeltaNet). Its training forms run on torch or, where it writes them
    as a block-bidirectional recurrence (fsc/model/fla_scan.py) and says so in `backends`, on
    fla: each of the four does."""

    def fold_blocks(self, x, block_lengths: list[int], cache: LayerCache):
        """One pass of the chunked form from the cache's state (`forward_blockwise_from`), its
        end state written into the cache; the fold per block where that form is not at hand."""
        if not self.carries or self.backend != "torch":
            return super().fold_blocks(x, block_lengths, cache)
        y, end = self.forward_blockwise_from(x, block_lengths, cache.tensors if cache.length else None,
                                             cache.length)
        assert end.keys() == cache.tensors.keys(), (self.kind, end.keys())
        for name, t in end.items():
            cache.tensors[name].copy_(t)
        cache.length += x.shape[1]
        return y

    def _synthetic_fill(self, name: str, t: torch.Tensor, generator) -> None:
        """normal(0, 0.5), the size of a trained state; Mamba (its conv window) and linear
        attention (its sums) fill their own."""
        t.normal_(0.0, 0.5, generator=generator)
