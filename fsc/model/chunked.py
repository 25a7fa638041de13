"""What the chunked training forms of the recurrent mixers share.

`forward_blockwise` of Mamba, linear attention, GLA and Gated DeltaNet works chunk by chunk: a
chunk is a run of whole blocks, the mixer's forward (causal) recurrence crosses from one chunk
to the next through one carried state, and inside a chunk both the causal part and the in-block
backward term are masked quadratic forms computed in one pass. `Chunks` lays a sequence out in
such chunks; `decay_matrix` gives the pairwise decays of a scalar-decay recurrence in a chunk.

Blocks of unequal length (a prompt's partial last block) are padded at their end to the longest
block, and the last chunk is filled with whole padding blocks. Padding is zeros everywhere (no
input, a log decay of 0): every mixer's recurrence passes a zero token through unchanged, so the
real tokens' outputs are those of the unpadded sequence, and the padding's own are dropped.
"""

from __future__ import annotations

import math

import torch

from fsc.model.layers import block_ids

LOG2E = math.log2(math.e)  # log2 units: exp(x) = exp2(x · LOG2E)


class Chunks:
    """A sequence cut into blocks (`block_lengths`) laid out in `n` chunks of `m` blocks of
    `G` tokens each (C = m·G tokens a chunk); G is the longest block.

    pack:   (B, T, ...) -> (B, n, C, ...), zeros at the padding.
    unpack: (B, n, C, ...) -> (B, T, ...), the real tokens only.
    causal:         (C, C) bool, key s at or before query t (s <= t).
    later_in_block: (C, C) bool, s after t in t's block (the backward scan's reach).
    """

    def __init__(self, block_lengths: list[int], blocks_per_chunk: int, device, unit: int = 1):
        """`unit`: m is a multiple of it (blocks_per_chunk must be one)."""
        G, n_blocks = max(block_lengths), len(block_lengths)
        self.G, self.m = G, min(blocks_per_chunk, -(-n_blocks // unit) * unit)
        self.n = -(-n_blocks // self.m)
        self.C = self.m * G
        self.T = sum(block_lengths)
        self.index = None  # the real tokens' places in the padded layout, when not a prefix
        if any(g != G for g in block_lengths):
            lengths = torch.tensor(block_lengths, device=device)
            ids = block_ids(block_lengths, device)  # (T,)
            start = (lengths.cumsum(0) - lengths)[ids]  # each token's block start, unpadded
            self.index = ids * G + torch.arange(self.T, device=device) - start
        pos = torch.arange(self.C, device=device)
        t, s = pos[:, None], pos[None, :]
        self.causal = s <= t
        self.later_in_block = (s > t) & (s // G == t // G)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        B, rest, L = x.shape[0], x.shape[2:], self.n * self.C
        if self.index is not None:
            x = x.new_zeros(B, L, *rest).index_copy(1, self.index, x)
        elif L > self.T:
            x = torch.cat([x, x.new_zeros(B, L - self.T, *rest)], 1)
        return x.reshape(B, self.n, self.C, *rest)

    def before(self, at: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Where the last token before each of the blocks `at` (B, K) stands in the packed
        layout, blocks of G tokens each: (rows (B, 1), chunk (B, K), place in the chunk (B, K)).
        A block's start state is read there: a block's last row of a decay matrix holds only
        the forward scan. Block 0 has no token before it: it points at token 0, and its state
        is the zero state, which the caller masks in."""
        e = (at * self.G - 1).clamp(min=0)
        rows = torch.arange(at.shape[0], device=at.device)[:, None]
        return rows, e // self.C, e % self.C

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(x.shape[0], self.n * self.C, *x.shape[3:])
        return x[:, : self.T] if self.index is None else x[:, self.index]


class _Decays(torch.autograd.Function):
    """`decay_matrix` with its backward written out: no graph of the pairwise intermediates,
    and fp64 only where the forward had it (the running sum's gradient, whose row and column
    sums cancel under strong decays)."""

    @staticmethod
    def forward(ctx, la, causal, later):
        la2 = la * LOG2E  # (B, n, H, C)
        cum = la2.double().cumsum(-1)
        fwd = (cum[..., :, None] - cum[..., None, :]).float()  # (B, n, H, t, s): over (s, t]
        seg = torch.where(causal, fwd, la2[..., :, None] - la2[..., None, :] - fwd)
        dec = torch.exp2(seg.masked_fill_(~(causal | later), float("-inf")))
        ctx.save_for_backward(dec, causal)
        return dec

    @staticmethod
    def backward(ctx, d_dec):
        dec, causal = ctx.saved_tensors
        d_seg = d_dec * dec  # by the segment sum in natural log units; 0 where masked
        d_fwd = d_seg * causal  # segments cum_t − cum_s
        d_bwd = d_seg - d_fwd  # segments la_t − la_s − (cum_t − cum_s)
        net = (d_fwd - d_bwd).double()  # the running sum's share, summed in fp64 as it was formed
        d_cum = net.sum(-1) - net.sum(-2)  # (B, n, H, C)
        d_la = d_bwd.sum(-1) - d_bwd.sum(-2) + d_cum.flip(-1).cumsum(-1).flip(-1)
        return d_la, None, None


def decay_matrix(la: torch.Tensor, ch: Chunks) -> torch.Tensor:
    """Pairwise decays of a recurrence with a scalar log decay per head and token.

    la: (B, n, C, H) log decays (<= 0) of the packed sequence.
    Returns (B, n, H, C, C), entry (t, s):
        exp(Σ la over (s, t])  for s <= t (the forward scan: s's input seen from t),
        exp(Σ la over [t, s))  for s after t in t's block (the backward scan from zero),
        0                       elsewhere.
    The forward segment sums are differences of an fp64 running sum, so they are exact to fp32
    rounding however large the running sum grows (an fp32 one would lose ulp(running sum) to
    cancellation). A backward segment lies inside one block, so la_t − la_s − (cum_t − cum_s)
    holds no large term: it is formed in fp32 from the forward difference. The sums are in
    log2 units and the decays their exp2, several times cheaper than exp on a CPU (and not
    slowed by the −inf of the masked pairs, as exp is).
    """
    return _Decays.apply(la.transpose(-1, -2), ch.causal, ch.later_in_block)

class _Scan(torch.autograd.Function):
    """h_{i+1} = a_i ⊙ h_i + x_i along dim 1, by a loop over i that autograd does not record:
    its backward is the same recurrence run in reverse, so a scan of n steps costs 2n small
    in-place ops and no graph of n nodes."""

    @staticmethod
    def forward(ctx, a, x, h0):
        steps = x.new_empty(x.shape[1] + 1, *x.shape[:1], *x.shape[2:])  # (n + 1, B, ...)
        steps[0] = h0
        a_t, x_t = a.transpose(0, 1), x.transpose(0, 1)
        for i in range(x.shape[1]):
            torch.addcmul(x_t[i], a_t[i], steps[i], out=steps[i + 1])
        ctx.save_for_backward(a, steps)
        return steps.transpose(0, 1)

    @staticmethod
    def backward(ctx, d_steps):
        a, steps = ctx.saved_tensors
        a_t, d = a.transpose(0, 1), d_steps.transpose(0, 1)
        after = torch.empty_like(steps[1:])  # the loss's gradient by h_{i+1}, all paths
        after[-1] = d[-1]
        for i in range(after.shape[0] - 1, 0, -1):
            torch.addcmul(d[i], a_t[i], after[i], out=after[i - 1])
        d_h0 = d[0] + a_t[0] * after[0]
        d_a = (after * steps[:-1]).sum_to_size(a_t.shape).transpose(0, 1)
        return d_a, after.transpose(0, 1), d_h0


def scan(a: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """The states of the diagonal recurrence h_{i+1} = a_i ⊙ h_i + x_i from h_0 = h0 (zeros by
    default), along dim 1: x (B, n, ...), a broadcastable to it (a decay per step), h0 (B, ...).
    Returns (B, n + 1, ...): h_0 (the state before step 0), ..., h_n (the state after the last).
    """
    h0 = x.new_zeros(x.shape[:1] + x.shape[2:]) if h0 is None else h0.expand(x.shape[:1] + x.shape[2:])
    return _Scan.apply(a, x, h0.to(x.dtype))
