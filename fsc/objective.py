"""The training objectives: the masked-diffusion bound of one frontier block (`frontier`) or of
every block at once (`blocks`), and next-token NLL (`ar`).

Frontier (G > 1), per sequence: one frontier block drawn uniformly among the blocks that hold
supervised positions (all blocks for text; the answer's blocks for a synthetic task), a mask
rate t ~ U(eps, 1], each supervised frontier position masked with probability t; a draw that
masks none masks the position of the lowest draw (`forced`), so every frontier has one. Earlier
blocks stay clean; later ones play no part: the batch is cut after the last frontier, and the
block-causal forward keeps a sequence's later blocks from reaching its frontier.

The loss (`elbo`) is the cross-entropy on the masked positions weighted by 1/t, divided by the
frontier's n supervised positions, and 0 for a forced draw: MDLM's and LLaDA's estimate, which
scores a draw that masks nothing as 0, so its mean is the block's NLL bound per token. (Weighing
the forced position by its 1/t, at the small t a draw that masks none mostly has, put the mean
at about twice the bound at G 4.) `masked` averages over the masked positions, a forced one
included: the same optimum without the 1/t spikes; one position masked is drawn twice as often
as the others, so its mean is the bound's to within (c1 - bound) / (n + 1), c1 the
cross-entropy of a lone masked position.

The frontier logits are the ones the cached decoder computes: `fold` of the clean prefix, then
a `step` of the masked frontier (tests/train/test_objective.py checks it for every mixer).

Blocks (G > 1): every block with supervised positions gets the frontier's draw (its own t and
mask) and is scored in one two-stream forward: the clean sequence gives the KV or state at
every block boundary, each masked block reads the one before it. Each block's loss is the
frontier loss of that block drawn alone (tests/train/test_blocks.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from fsc.model.layers import noised_positions

EPS = 1e-3  # smallest mask rate: 1/t weights stay bounded


@dataclass
class Batch:
    tokens: torch.Tensor  # [B, L] long
    target: torch.Tensor  # [B, L] bool: supervised positions

    def rows(self, part: slice) -> Batch:
        return Batch(self.tokens[part], self.target[part])

    @classmethod
    def of(cls, samples, device) -> Batch:
        return cls(torch.tensor([s.ids for s in samples], dtype=torch.long, device=device),
                   torch.tensor([s.target for s in samples], dtype=torch.bool, device=device))


@dataclass
class Frontier:
    """One draw of the frontier objective over a batch."""

    inputs: torch.Tensor  # [B, T]: clean prefix, masked frontier, later blocks as they were
    labels: torch.Tensor  # [B, T]: the clean tokens
    masked: torch.Tensor  # [B, T] bool: the masked frontier positions
    block: torch.Tensor  # [B] long: each sequence's frontier block
    rate: torch.Tensor  # [B]: each sequence's mask rate t
    supervised: torch.Tensor  # [B]: supervised positions in each frontier block
    G: int
    forced: torch.Tensor  # [B] bool: the draw masked none; its lowest was masked

    def rows(self, part: slice) -> Frontier:
        return Frontier(self.inputs[part], self.labels[part], self.masked[part], self.block[part],
                        self.rate[part], self.supervised[part], self.G, self.forced[part])


def draw_frontier(batch: Batch, G: int, mask_id: int, gen: torch.Generator,
                  eps: float = EPS) -> Frontier:
    tokens, target = batch.tokens, batch.target
    B, L = tokens.shape
    assert L % G == 0, "the sequence length is a multiple of G"
    cpu = torch.device("cpu")
    blocks = target.view(B, L // G, G).any(-1).to(cpu)  # blocks that may be the frontier
    counts = blocks.sum(-1)
    if (counts == 0).any():
        raise ValueError("a sequence has no supervised position")
    pick = (torch.rand(B, generator=gen) * counts).long().clamp(max=counts - 1)
    block = torch.stack([blocks[b].nonzero()[pick[b], 0] for b in range(B)])
    rate = 1 - (1 - eps) * torch.rand(B, generator=gen)  # in (eps, 1]
    u = torch.rand(B, G, generator=gen)
    frontier = torch.stack([target[b, block[b] * G : (block[b] + 1) * G].to(cpu)
                            for b in range(B)])  # [B, G] supervised frontier positions
    m = frontier & (u < rate[:, None])
    forced = ~m.any(-1)
    lowest = torch.where(frontier, u, 2.0).argmin(-1)  # at least one: the lowest draw
    m[torch.arange(B), lowest] = True
    T = int(block.max() + 1) * G
    masked = torch.zeros(B, T, dtype=torch.bool)
    for b in range(B):
        masked[b, block[b] * G : (block[b] + 1) * G] = m[b]
    masked = masked.to(tokens.device)
    labels = tokens[:, :T]
    inputs = labels.masked_fill(masked, mask_id)
    return Frontier(inputs, labels, masked, block, rate, frontier.sum(-1), G, forced)


def frontier_logits(model, f: Frontier) -> torch.Tensor:
    """Logits [n, vocab] of the masked frontier positions, in row-major order."""
    T = f.inputs.shape[1]
    return model.forward_blockwise(f.inputs, [f.G] * (T // f.G), select=f.masked)


WEIGHTINGS = ("elbo", "masked")


def frontier_loss(model, f: Frontier, weighting: str = "elbo") -> tuple[torch.Tensor, int]:
    """(mean over sequences of the frontier cross-entropy per token, tokens the forward read).

    `elbo` weighs each masked position by 1/t over the frontier's supervised positions, a
    forced draw by 0 (the masked-diffusion bound, `elbo_weights`); `masked` averages over the
    masked positions (the same optimum, lower variance: no 1/t spikes at small t)."""
    terms, _ = _frontier_terms(model, f, weighting)
    return terms.sum() / f.inputs.shape[0], f.inputs.numel()


def _frontier_terms(model, f: Frontier, weighting: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(each masked position's weighted cross-entropy, the sequence it belongs to)."""
    logits = frontier_logits(model, f)
    ce = F.cross_entropy(logits, f.labels[f.masked], reduction="none")
    rows = f.masked.nonzero()[:, 0].cpu()
    if weighting == "elbo":
        per_row = elbo_weights(f.rate, f.supervised, f.forced)
    else:
        per_row = 1.0 / f.masked.sum(-1).cpu().to(f.rate.dtype)
    weight = per_row[rows].to(ce.device)
    return ce * weight, rows


def elbo_weights(rate: torch.Tensor, supervised: torch.Tensor,
                 forced: torch.Tensor) -> torch.Tensor:
    """The `elbo` weight of each masked position of a unit (a frontier, a block): 1/(t n) for n
    supervised positions masked at rate t, 0 where the draw masked none and one was forced (the
    references score such a draw 0: weighing it 1/t biased the mean upward)."""
    return torch.where(forced, 0.0, 1.0 / (rate * supervised.clamp(min=1)))


def sequence_nll(model, batch: Batch) -> torch.Tensor:
    """[B] on the CPU: each sequence's mean next-token NLL over its supervised positions (the
    held-out loss of an autoregressive read, fsc.eval.loss)."""
    B = batch.tokens.shape[0]
    ce, rows = _ar_terms(model, batch)
    counts = torch.zeros(B).index_add_(0, rows, torch.ones(len(rows)))
    return torch.zeros(B).index_add_(0, rows, ce.float().cpu()) / counts.clamp(min=1)


@dataclass
class Blocks:
    """One draw of the blocks objective: every block that holds supervised positions is a
    frontier, read in one two-stream forward (`LM.forward_two_stream`) against the clean
    blocks before it. K is the most such blocks a sequence has; a sequence with fewer holds
    padding blocks (nothing masked, not scored)."""

    clean: torch.Tensor  # [B, T]: the clean sequence, cut after the last scored block
    noised: torch.Tensor  # [B, K·G]: the scored blocks, masked
    labels: torch.Tensor  # [B, K·G]: their clean tokens
    masked: torch.Tensor  # [B, K·G] bool
    blocks: torch.Tensor  # [B, K] long: where each scored block stands (0 for padding)
    scored: torch.Tensor  # [B, K] bool: a real block, not padding
    rate: torch.Tensor  # [B, K]: each block's mask rate t
    supervised: torch.Tensor  # [B, K]: supervised positions in each block
    G: int
    forced: torch.Tensor  # [B, K] bool: the block's draw masked none; its lowest was masked

    def rows(self, part: slice) -> Blocks:
        return Blocks(self.clean[part], self.noised[part], self.labels[part], self.masked[part],
                      self.blocks[part], self.scored[part], self.rate[part],
                      self.supervised[part], self.G, self.forced[part])


def draw_blocks(batch: Batch, G: int, mask_id: int, gen: torch.Generator,
                eps: float = EPS) -> Blocks:
    """Per block with supervised positions, the frontier's draw: t ~ U(eps, 1] and each
    supervised position masked with probability t, at least one (`forced`: the lowest draw's,
    where t masked none)."""
    tokens, target = batch.tokens, batch.target
    B, L = tokens.shape
    assert L % G == 0, "the sequence length is a multiple of G"
    cpu = torch.device("cpu")
    sup = target.view(B, L // G, G).to(cpu)  # (B, n, G)
    has = sup.any(-1)  # (B, n): blocks that may be a frontier
    counts = has.sum(-1)
    if (counts == 0).any():
        raise ValueError("a sequence has no supervised position")
    K = int(counts.max())
    order = (~has).to(torch.uint8).argsort(dim=-1, stable=True)[:, :K]  # supervised blocks first
    scored = torch.arange(K) < counts[:, None]  # (B, K)
    blocks = torch.where(scored, order, 0)
    rate = 1 - (1 - eps) * torch.rand(B, K, generator=gen)  # in (eps, 1]
    u = torch.rand(B, K, G, generator=gen)
    frontier = sup.gather(1, blocks[..., None].expand(-1, -1, G)) & scored[..., None]  # (B, K, G)
    m = frontier & (u < rate[..., None])
    forced = scored & ~m.any(-1)
    lowest = torch.where(frontier, u, 2.0).argmin(-1, keepdim=True)  # at least one
    m.scatter_(-1, lowest, scored[..., None])
    T = int(torch.where(scored, blocks, 0).max() + 1) * G
    dev = tokens.device
    at = noised_positions(blocks, G).to(dev)  # (B, K·G)
    labels = tokens.gather(1, at)
    masked = m.flatten(1).to(dev)
    return Blocks(tokens[:, :T], labels.masked_fill(masked, mask_id), labels, masked,
                  blocks.to(dev), scored, rate, frontier.sum(-1), G, forced)


def block_losses(model, d: Blocks, weighting: str = "elbo", carry=None) -> torch.Tensor:
    """[B, K]: each scored block's loss as `frontier_loss` computes it for a frontier there
    (0 for padding blocks); with `carry` (fsc.model.cache.Carry), from its passed state."""
    logits = model.forward_two_stream(d.clean, d.noised, d.blocks, select=d.masked, carry=carry)
    ce = F.cross_entropy(logits, d.labels[d.masked], reduction="none")
    B, K = d.blocks.shape
    at = d.masked.nonzero()  # (n, 2), row-major like the logits
    unit = (at[:, 0] * K + at[:, 1] // d.G).cpu()  # the block each masked position is in
    if weighting == "elbo":
        per_block = elbo_weights(d.rate, d.supervised, d.forced)
    else:
        per_block = 1.0 / d.masked.view(B, K, d.G).sum(-1).cpu().to(d.rate.dtype)
    # (a padding block's weight is never read: it holds no masked position)
    weight = per_block.flatten()[unit].to(ce.device)
    losses = torch.zeros(B * K, device=ce.device).index_add(0, unit.to(ce.device), ce * weight)
    return losses.view(B, K)


def blocks_loss(model, d: Blocks, weighting: str = "elbo", carry=None) -> tuple[torch.Tensor, int]:
    """(mean over sequences of the mean over their scored blocks of the block loss, tokens the
    forward read). Its expectation is the frontier loss's (a frontier drawn uniformly among a
    sequence's scored blocks), from every block at once."""
    per_row = d.scored.sum(-1).to(d.rate.dtype).to(d.clean.device)
    loss = (block_losses(model, d, weighting, carry).sum(-1) / per_row).mean()
    return loss, d.clean.numel() + d.noised.numel()


def ar_loss(model, batch: Batch, carry=None) -> tuple[torch.Tensor, int]:
    """(next-token cross-entropy on the supervised positions, tokens read); G = 1 blocks."""
    ce, _ = _ar_terms(model, batch, carry)
    return ce.mean(), batch.tokens.numel()


def _ar_terms(model, batch: Batch, carry=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(each supervised position's next-token cross-entropy, the sequence it belongs to)."""
    tokens, target = batch.tokens, batch.target
    L = tokens.shape[1]
    select = torch.zeros_like(target)
    select[:, :-1] = target[:, 1:]  # position i predicts token i + 1
    logits = model.forward_blockwise(tokens, [1] * L, select=select, carry=carry)
    labels = tokens[:, 1:][target[:, 1:]]
    return F.cross_entropy(logits, labels, reduction="none"), select.nonzero()[:, 0].cpu()


def loss_of(model, objective: str, batch: Batch, G: int, mask_id: int,
            gen: torch.Generator, weighting: str = "elbo",
            part: slice | None = None, carry=None) -> tuple[torch.Tensor, int]:
    """The loss of `batch`, or of its rows `part` (a data-parallel process's share: the draws
    are made for the whole batch, then cut, so the shares add up to one process's batch).
    `carry` (state passing) starts the forward from its state: ar and blocks only, whose
    forward reads the clean sequence (fsc.train.run refuses frontier)."""
    part = part or slice(None)
    if objective == "ar":
        return ar_loss(model, batch.rows(part), carry)
    if objective == "blocks":
        return blocks_loss(model, draw_blocks(batch, G, mask_id, gen).rows(part), weighting, carry)
    assert carry is None, "state passing reads the clean sequence: ar or blocks"
    return frontier_loss(model, draw_frontier(batch, G, mask_id, gen).rows(part), weighting)
