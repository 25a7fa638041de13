"""The recurrent mixers' training forms on flash-linear-attention's chunk kernels (fla-core).

Every recurrent mixer is block-bidirectional: token t reads the causal scan over the sequence up
to t, its own write included, plus the in-block backward term: the same recurrence over the
tokens after t in its block, reversed and from zero, read before t's own write (so that write
counts once). On fla each is one kernel call:

- the causal scan: one call over the whole sequence;
- the backward term: one varlen call (cu_seqlens) over every block of every sequence, each block
  reversed. The reversed scan's state at token t + 1 holds exactly the writes after t, so t's
  query goes to t + 1's place, times t's own decay (which the backward scan applies before t
  reads), and t's output comes back from there. Nothing is subtracted, and the delta rule, whose
  own write is no separable term, takes the same path.

A `Recurrence` holds what differs between recurrences: its kernel call, and how a query is
carried back to its block's start (`two_stream` needs that): by its decay (`carried_by_decay`),
or for the delta rule, whose writes also act on the state before them, through the WY form. A
query's own decay follows from the gate's rank (`decayed`): e^g per key when g has q's rank,
per head when it has one less.
The three recurrences (o_t = scale · q_tᵀ h_t, h_t after t's write; β [B, T, H]), the last two
defined beside their mixers' other forms, in fsc/model/gla.py and fsc/model/gated_delta.py:

| recurrence             | h ←                             | gate g       | kernel                 |
| SCALAR_DECAY (here)    | e^g h + k vᵀ (g None: no decay) | [B, T, H]    | chunk_simple_gla       |
| gla.PER_KEY_DECAY      | diag(e^g) h + k vᵀ              | [B, T, H, K] | chunk_gla              |
| gated_delta.DELTA_RULE | e^g (I − β k kᵀ) h + β k vᵀ     | [B, T, H]    | chunk_gated_delta_rule |

SCALAR_DECAY is defined here rather than in a mixer's module: it is the plain scalar-decay
scan that two mixers run (linear attention without a gate, Mamba-2 with a per-head decay), so
defining it in either would make the other import a sibling mixer; and it needs nothing beyond
the generic rules (`decayed`, `carried_by_decay`).

Gates are log decays (≤ 0) in fp32; q, k, v (and β) go in the autocast dtype when autocast is on,
else in fp32; outputs come back in fp32. Layout [B, T, H, D].
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fsc.errors import UsageError
from fsc.model.layers import block_ids

BACKENDS = ("auto", "torch", "fla")
FLA_PACKAGE = "fla-core==0.6.0"  # the version these forms are tested against (pyproject's fla extra)


def train_backend(asked: str, device) -> str:
    """The backend the training forms run on: `torch` (the chunked forms) or `fla`. `auto` is
    fla on CUDA when fla is installed, else torch. fla runs Triton kernels, so it needs CUDA
    (or the Triton interpreter, TRITON_INTERPRET=1, as the tests run it)."""
    assert asked in BACKENDS, asked
    cuda = torch.device(device).type == "cuda"
    installed = importlib.util.find_spec("fla") is not None
    if asked == "auto":
        return "fla" if cuda and installed else "torch"
    if asked == "fla":
        if not installed:
            raise UsageError(f"--train-backend fla needs flash-linear-attention: pip install "
                             f"'fsc[fla]' ({FLA_PACKAGE})")
        if not cuda and os.environ.get("TRITON_INTERPRET") != "1":
            raise UsageError(f"--train-backend fla runs Triton kernels on CUDA; the device is "
                             f"{torch.device(device)} (use --train-backend torch)")
    return asked


def fla_ops():
    """The `fla.ops` module, imported on first use: fla is optional and slow to import."""
    return importlib.import_module("fla.ops")


def in_blocks(t, G: int):
    """t [B, K·G, H, ...] as [B, K, G, H, ...], fp32."""
    return t.float().unflatten(1, (-1, G))


def decayed(q, g):
    """q times its own decay e^g: per key for g of q's rank, per head for g one rank lower
    (None: no decay)."""
    return q if g is None else q * torch.exp(g if g.dim() == q.dim() else g[..., None])


def carried_by_decay(q, k, g, beta, G: int):
    """r [B, K·G, H, Dk]: each token's query carried back to its block's start, so that r_tᵀ H
    is what t reads of the state H the block starts from: q e^{c_t}, c_t the block's inclusive
    cumulative log decay (per head or per key, as `decayed`)."""
    if g is None:
        return q
    return decayed(in_blocks(q, G), in_blocks(g, G).cumsum(2)).flatten(1, 2)


@dataclass(frozen=True)
class Recurrence:
    """A recurrence fla runs, as `blockwise` and `two_stream` take it.

    kernel(q, k, v, g, beta, scale, **varlen) -> o [B, T, H, V]: one fla chunk call,
    o_t = scale · q_tᵀ h_t with h_t after t's own write, its inputs as `_scan` casts and lays
    them out (varlen: cu_seqlens and cu_seqlens_cpu, or nothing).
    carried(q, k, g, beta, G) -> r [B, K·G, H, Dk]: each token's query carried back to its
    block's start; `carried_by_decay` holds for any recurrence whose write only decays the
    state before it."""

    kernel: Callable
    carried: Callable = carried_by_decay


def _chunk_simple_gla(q, k, v, g, beta, scale, **varlen):
    o, _ = fla_ops().chunk_simple_gla(q, k, v, g, scale=scale, **varlen)
    return o


SCALAR_DECAY = Recurrence(_chunk_simple_gla)


def blockwise(rec: Recurrence, q, k, v, g, block_lengths: list[int], scale: float, beta=None):
    """o [B, T, H, V] (fp32) of the block-bidirectional recurrence `rec` over a sequence cut
    into blocks: q, k [B, T, H, K], v [B, T, H, V], g (see the table above), beta [B, T, H]
    (DELTA_RULE)."""
    o = _scan(rec, q, k, v, g, beta, scale)
    if max(block_lengths) > 1:
        o = o + _backward(rec, q, k, v, g, beta, block_lengths, scale)
    return o


def two_stream(rec: Recurrence, clean: tuple, noised: tuple, blocks, scale: float):
    """The `blocks` objective's two streams. clean = (q, k, v, g, beta) [B, T, H, ·] in blocks of
    G; noised the same of K blocks per sequence [B, K·G, H, ·], the k-th read against the clean
    blocks before blocks[b, k] (B, K). Returns o_clean [B, T, H, V] (as `blockwise`) and
    o_noised [B, K·G, H, V], fp32.

    A noised block's forward read of the state H its clean twin starts from is r_tᵀ H, r_t its
    query carried back through its block's own steps (`_carried`). So each noised block also
    stands, as inert tokens (k = 0, β = 0, no decay) holding r, in the clean sequence just
    before its twin, where the causal scan holds H; its own forward part is a sequence of its
    own. One causal call reads the clean rows so laid out and the noised blocks; one varlen
    call gives the backward terms of the clean and the noised blocks."""
    qn, kn, _, gn, bn = noised
    B, T = clean[0].shape[:2]
    K = blocks.shape[1]
    G = qn.shape[1] // K
    nb, L = T // G, T + K * G
    dev = qn.device
    # places in the laid-out row: clean block i after the noised blocks standing at i or before
    # it; noised blocks at one place in their order k
    at = torch.arange(nb, device=dev)
    ahead = (blocks[:, None, :] <= at[None, :, None]).sum(-1)  # (B, nb)
    place_c = torch.arange(T, device=dev) + G * ahead.repeat_interleave(G, 1)  # (B, T)
    ks = torch.arange(K, device=dev)
    same = (blocks[:, None, :] == blocks[:, :, None]) & (ks[None, None, :] < ks[None, :, None])
    before = (blocks[:, None, :] < blocks[:, :, None]).sum(-1) + same.sum(-1)  # (B, K)
    place_n = ((blocks + before) * G)[..., None] + torch.arange(G, device=dev)  # (B, K, G)
    order = torch.cat([place_c, place_n.flatten(1)], 1).argsort(1)  # (B, L): the row's sources
    rows = torch.arange(B, device=dev)[:, None]

    def lay(c, inert, n):  # clean c with the inert tokens laid out in L, then the noised blocks
        return None if c is None else torch.cat([torch.cat([c, inert], 1)[rows, order], n], 1)

    def still(n):  # inert tokens: no write, no decay
        return None if n is None else torch.zeros_like(n)

    q = lay(clean[0], rec.carried(qn, kn, gn, bn, G), qn)
    k, v, g, beta = (lay(c, still(n), n) for c, n in zip(clean[1:], noised[1:]))
    o = _scan(rec, q, k, v, g, beta, scale, [L] + [G] * K)  # (B, L + K·G, H, V)
    o_clean = o[rows, place_c]
    o_noised = o[rows, place_n.flatten(1)] + o[:, L:]
    if G == 1:
        return o_clean, o_noised
    both = [None if c is None else torch.cat([c, n], 1) for c, n in zip(clean, noised)]
    back = _backward(rec, *both, [G] * (nb + K), scale)
    return o_clean + back[:, :T], o_noised + back[:, T:]


def _backward(rec, q, k, v, g, beta, block_lengths, scale):
    """The in-block backward term [B, T, H, V]: one varlen call over the blocks reversed, token
    t's query (times its own decay) at t + 1's place, its output read back from there (0 for
    a block's last token)."""
    T = q.shape[1]
    lengths = torch.tensor(block_lengths)
    ids = block_ids(block_lengths, "cpu")
    pos = torch.arange(T)
    end = lengths.cumsum(0)[ids]  # each token's block end, exclusive
    start = end - lengths[ids]
    rev = start + end - 1 - pos  # the token at each place of the reversed layout (an involution)
    q_from = (rev - 1).clamp(min=0)  # place p asks with the query of token rev[p] − 1 ...
    q_none = (rev == start).view(1, T, 1, 1)  # ... unless rev[p] begins its block
    o_from = rev[(pos + 1).clamp(max=T - 1)]  # token t reads the output at t + 1's place ...
    o_none = (pos == end - 1).view(1, T, 1, 1)  # ... unless t ends its block
    dev = q.device
    q_from, q_none, o_from, o_none, rev = (t.to(dev) for t in (q_from, q_none, o_from, o_none, rev))
    qr = decayed(q, g)[:, q_from].masked_fill(q_none, 0.0)
    k, v, g, beta = (None if t is None else t[:, rev] for t in (k, v, g, beta))
    o = _scan(rec, qr, k, v, g, beta, scale, block_lengths)
    return o[:, o_from].masked_fill(o_none, 0.0)


def _scan(rec, q, k, v, g, beta, scale, lengths: list[int] | None = None):
    """One fla chunk call (`rec.kernel`): o [B, T', H, V] (fp32), o_t = scale · q_tᵀ h_t, h_t
    after t's own write; the scan runs over each row, or with `lengths` (summing to T') over
    each of the row's segments from zero (all rows flattened into one varlen sequence)."""
    B, Tp = q.shape[:2]
    device = q.device.type
    dt = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else torch.float32
    q, k, v = q.to(dt), k.to(dt), v.to(dt)
    g = None if g is None else g.float()
    extra = {}
    if lengths is not None:
        assert sum(lengths) == Tp
        cu = torch.tensor([0] + lengths * B).cumsum(0)
        extra = {"cu_seqlens": cu.to(q.device), "cu_seqlens_cpu": cu}
        q, k, v = (t.flatten(0, 1)[None] for t in (q, k, v))
        g = None if g is None else g.flatten(0, 1)[None]
        beta = None if beta is None else beta.flatten(0, 1)[None]
    beta = None if beta is None else beta.to(dt)
    o = rec.kernel(q, k, v, g, beta, scale, **extra)
    return o.float().reshape(B, Tp, *o.shape[2:])
