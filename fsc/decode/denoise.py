"""One block denoised: K steps, each a forward pass of the block against the cache (which the
steps do not change), a pick (fsc.decode.sampler: each position's sample, its confidence and the
policy's priority) and a reveal of the best-ranked masked positions: on an even schedule over
the K steps, or with a threshold τ every position at least τ probable and at least as many as
keep the block on that schedule's finish: one, or more where the schedule's later steps would
not reveal the rest (see fsc.decode).

A step is written once (`Steps._step`) and run two ways: eagerly, op by op (the CPU,
`--no-graphs`, the uncached reference), or replayed from one CUDA graph (`Steps` given a
`graph_key`): the forward pass, the pick and the reveal captured together, so that nothing of
a step is issued from Python but its inputs. Those are written into tensors the capture reads
(the block, its mask, the step's reveal count, the step's uniforms); the draws are made outside
the graph, from each row's own generator, in the order the eager step makes them, so a replay
samples what the eager step samples. On the even schedule a block is finished by its last step
by construction (every step reveals at least one position), so no step waits on the GPU; with
a threshold each step asks whether any position is left (a block ends early: that is what the
threshold buys).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from fsc import graphs


def even_schedule(g: int, steps: int) -> list[int]:
    """How many positions each of `steps` steps reveals so that all g are revealed."""
    return [(k + 1) * g // steps - k * g // steps for k in range(steps)]


class _Block:
    """A block's denoising state, in tensors a step reads and writes in place (a captured step
    reads and writes the same memory at every replay)."""

    def __init__(self, tokens, masked, draws):
        self.tokens, self.masked = tokens.clone(), masked.clone()
        # the step's reveal count (even schedule), or the positions the even schedule
        # reveals after it (threshold)
        self.count = torch.zeros(1, dtype=torch.long, device=tokens.device)
        self.u, self.o = (None if d is None else d.clone() for d in draws)
        self.graph = None
        self.key = None


class Steps:
    """`run(block, masked)`: the masked positions of `block` [B, g] (holding the mask id) filled
    in at most `steps` steps, each `forward(tokens) -> logits [B, g, V]` then `pick` (an
    fsc.decode.sampler picker) then the reveal. Every row has the same number of masked positions.
    With a threshold a row's block may be done before the batch's: from then on that row takes
    no draws (its generators advance as they would alone, so its next blocks sample as alone).
    With `graph_key` (a function of the state the forward pass reads besides its tokens:
    fsc.graphs' key, None where nothing else changes) a step is replayed from a CUDA graph
    captured for each block shape and key; else it runs eagerly."""

    def __init__(self, forward: Callable, pick, steps: int, threshold: float | None = None,
                 graph_key: Callable[[], object] | None = None):
        self.forward, self.pick, self.steps, self.threshold = forward, pick, steps, threshold
        self.graph_key = graph_key
        self._blocks: dict[tuple, _Block] = {}
        self.row_used: list[list[int]] = []  # steps each row of each block took, as alone

    @property
    def used(self) -> list[int]:
        """Steps each block took: the batch's, its slowest row's."""
        return [max(rows, default=0) for rows in self.row_used]

    def run(self, block, masked, n: int | None = None):
        """The filled block [B, g] (a tensor of its own); `n`: the masked positions a row has
        (read from `masked` where not given)."""
        n = int(masked[0].sum()) if n is None else n
        k = min(self.steps, n)
        B = block.shape[0]
        if k == 0:  # nothing masked: no step, no draw
            self.row_used.append([0] * B)
            return block.clone()
        schedule = even_schedule(n, k)
        live = [True] * B  # rows still masked: only they take a step's draws
        steps = [0] * B
        draws = self.pick.draw(block.shape[1], live)
        state = self._blocks.get(tuple(block.shape))
        if state is None:
            state = self._blocks[tuple(block.shape)] = _Block(block, masked, draws)
        else:
            state.tokens.copy_(block)
            state.masked.copy_(masked)
        for i in range(k):
            if i:
                draws = self.pick.draw(block.shape[1], live)
            for held, d in zip((state.u, state.o), draws, strict=True):
                if d is not None:
                    held.copy_(d)
            state.count.fill_(schedule[i] if self.threshold is None else sum(schedule[i + 1:]))
            self._advance(state)
            steps = [s + on for s, on in zip(steps, live, strict=True)]
            if self.threshold is not None:  # a row whose block is done draws no more
                live = state.masked.any(-1).tolist()
                if not any(live):
                    break
        self.row_used.append(steps)
        return state.tokens.clone()

    def _advance(self, state: _Block) -> None:
        if self.graph_key is None:
            self._step(state)
            return
        key = self.graph_key()
        if state.graph is None or key != state.key:
            state.graph = None  # the old capture's memory goes first
            before = state.tokens.clone(), state.masked.clone()
            state.graph, _ = graphs.capture(lambda: self._step(state))
            state.tokens.copy_(before[0])  # as before the capture's own warm-up step
            state.masked.copy_(before[1])
            state.key = key
        state.graph.replay()

    def _step(self, state: _Block) -> None:
        """One step on `state`, in place: the forward pass, the pick, the reveal."""
        tok, conf, rank = self.pick.choose(self.forward(state.tokens), state.u, state.o)
        masked = state.masked
        rank = rank.masked_fill(~masked, float("-inf"))
        if self.threshold is None:
            need = state.count
        else:  # at least one, and what the schedule's later steps would leave unrevealed
            need = (masked.sum(-1) - state.count).clamp_min(1)
        order = rank.argsort(dim=-1, descending=True, stable=True).argsort(dim=-1)
        chosen = order < need[:, None]
        if self.threshold is not None:
            chosen |= conf >= self.threshold
        chosen &= masked
        state.tokens.copy_(torch.where(chosen, tok, state.tokens))
        masked &= ~chosen


def denoise(step, block, masked, steps: int, pick, threshold: float | None = None):
    """`block` [B, g] with its masked positions filled eagerly in at most `steps` steps of
    `step(tokens) -> logits [B, g, V]` and `pick` (see `Steps`)."""
    return Steps(step, pick, steps, threshold).run(block, masked)
