"""Gated linear attention: per-key-dimension forget gate, forward and in-block backward scans."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fsc import ops
from fsc.mixers import gla as spec
from fsc.model import fla_scan
from fsc.model.cache import LayerCache
from fsc.model.chunked import LOG2E, Chunks, scan
from fsc.model.mixer import FixedState

# The training form's pairs carry a key axis: tokens pair inside a group of whole blocks of at
# least GROUP tokens (B·T·S·H·K values); the state is carried from group to group.
GROUP = 4


def _chunk_gla(q, k, v, g, beta, scale, **varlen):
    o, _ = fla_scan.fla_ops().chunk_gla(q, k, v, g, scale=scale, **varlen)
    return o


# The training forms on fla: a gate per key dimension, g [B, T, H, K] (fsc/model/fla_scan.py).
PER_KEY_DECAY = fla_scan.Recurrence(_chunk_gla)


class GLA(FixedState):
    kind = "gla"
    carries = True  # on torch (the chunked forms)
    backends = ("torch", "fla")  # its training forms on fla: fsc/model/fla_scan.py

    def __init__(self, recipe, dtype, state_dtype):
        super().__init__(recipe.d_model, dtype, state_dtype)
        cfg = recipe.gla
        self.n_heads, self.head_dim = spec.dims(cfg, recipe.d_model)
        self.normalizer = cfg.gate_logit_normalizer
        d, hd = recipe.d_model, self.n_heads * self.head_dim
        self.wq = nn.Linear(d, hd, bias=False)
        self.wk = nn.Linear(d, hd, bias=False)
        self.wv = nn.Linear(d, hd, bias=False)
        self.wg = nn.Linear(d, hd, bias=True)
        self.wo = nn.Linear(hd, d, bias=False)

    def cache_shapes(self, batch, capacity):
        return {"state": ((batch, self.n_heads, self.head_dim, self.head_dim), self.state_dtype)}

    def _proj(self, x):
        B, T, _ = x.shape
        shape = (B, T, self.n_heads, self.head_dim)
        q, k, v = self.wq(x).view(shape), self.wk(x).view(shape), self.wv(x).view(shape)
        gk = F.logsigmoid(self.wg(x).float()).view(shape) / self.normalizer  # log gate <= 0
        return q, k, v, gk

    def _block(self, x, cache: LayerCache, commit: bool):
        B, G, _ = x.shape
        q, k, v, gk = self._proj(x)
        st = cache.tensors["state"]
        o = ops.gla_block(q, k, v, gk, st, 1 / math.sqrt(self.head_dim), st if commit else None)
        return self.wo(o.reshape(B, G, -1).to(x.dtype))

    def forward_blockwise(self, x, block_lengths):
        """In groups of whole blocks (at least GROUP tokens). Inside each group both
        directions as one pairwise decayed form (the gate is per key dimension, so pairs carry a
        key axis; the backward scan stays in its block); the state each group starts from
        carried from group to group (`chunked.scan`). On fla: chunk_gla
        (`PER_KEY_DECAY`)."""
        q, k, v, gk = self._proj(x)
        if self.backend == "fla":
            o = fla_scan.blockwise(PER_KEY_DECAY, q, k, v, gk, block_lengths, 1 / math.sqrt(self.head_dim))
            return self.wo(o.flatten(2).to(x.dtype))
        o, _ = self._chunked(q, k, v, gk, block_lengths, max(1, GROUP // max(block_lengths)))
        return self.wo(o.flatten(2).to(x.dtype))

    def forward_blockwise_from(self, x, block_lengths, start, at=0):
        """`forward_blockwise` (the chunked form) after a prefix that left `start`, and the
        state it ends in (see `Mixer.forward_blockwise_from`)."""
        q, k, v, gk = self._proj(x)
        o, _, h = self._chunked(q, k, v, gk, block_lengths, max(1, GROUP // max(block_lengths)),
                                h_init=self._state(start), final=True)
        return self.wo(o.flatten(2).to(x.dtype)), {"state": h.to(self.state_dtype)}

    def forward_two_stream(self, x_clean, x_noised, blocks):
        """The clean stream in groups of one block gives the state every block starts from;
        each noised block is then one group of its own, reading its clean twin's state."""
        if self.backend != "fla":
            return self.forward_two_stream_from(x_clean, x_noised, blocks, None)[:2]
        clean, noised = ((*self._proj(x), None) for x in (x_clean, x_noised))
        oc, on = fla_scan.two_stream(PER_KEY_DECAY, clean, noised, blocks, 1 / math.sqrt(self.head_dim))
        return self.wo(oc.flatten(2).to(x_clean.dtype)), self.wo(on.flatten(2).to(x_noised.dtype))

    def forward_two_stream_from(self, x_clean, x_noised, blocks, start):
        """`forward_two_stream` (the chunked form) after a prefix that left `start`, and the
        state the clean stream ends in (see `Mixer.forward_two_stream_from`)."""
        B, T, _ = x_clean.shape
        K = blocks.shape[1]
        G = x_noised.shape[1] // K
        q, k, v, gk = self._proj(x_clean)
        o, starts, end = self._chunked(q, k, v, gk, [G] * (T // G), 1, starts=True,
                                       h_init=self._state(start), final=True)
        q, k, v, gk = self._proj(x_noised)

        def units(t):  # (B, K·G, H, D) -> (B, K, H, G, D): one group a block
            return t.float().unflatten(1, (K, G)).transpose(2, 3)

        qb, kb, vb = units(q) / math.sqrt(self.head_dim), units(k), units(v)
        g2 = units(gk * LOG2E)
        cum = g2.cumsum(3)  # (B, K, H, G, Dk)
        h = starts[torch.arange(B, device=blocks.device)[:, None], blocks]  # (B, K, H, Dk, Dv)
        on = self._in_block(qb, kb, vb, g2, cum, None) + (qb * torch.exp2(cum)) @ h
        return (self.wo(o.flatten(2).to(x_clean.dtype)),
                self.wo(on.transpose(2, 3).flatten(1, 2).flatten(2).to(x_noised.dtype)),
                {"state": end.to(self.state_dtype)})

    @staticmethod
    def _state(start):
        """The forward state (B, H, Dk, Dv) fp32 of a `start` (None: zeros)."""
        return None if start is None else start["state"].float()

    def _chunked(self, q, k, v, gk, block_lengths, per, starts=False, h_init=None, final=False):
        """o (B, T, H, Dv) of the chunked form, groups of `per` blocks, the forward state
        carried from `h_init` (B, H, Dk, Dv; zeros by default); with `starts` (and per = 1)
        also the forward state each block starts from, (B, n_blocks, H, Dk, Dv) (else None);
        with `final`, last, the state at the end."""
        assert per == 1 or not starts
        ch = Chunks(block_lengths, per, q.device, unit=per)  # a chunk is a group
        visible = None if per == 1 else ch.causal | ch.later_in_block

        def groups(t):  # (B, T, H, D) -> (B, n, H, S, D)
            return ch.pack(t.float()).transpose(2, 3).contiguous()

        qg, kg, vg = groups(q) / math.sqrt(self.head_dim), groups(k), groups(v)
        g2 = groups(gk * LOG2E)  # log2 gates: exp2 is several times cheaper than exp on CPUs
        cum = g2.cumsum(3)  # (B, n, H, S, K): from the group's start, inclusive
        o = self._in_block(qg, kg, vg, g2, cum, visible)
        total = cum[..., -1:, :]  # (B, n, H, 1, K): over each whole group
        local = (kg * torch.exp2(total - cum)).transpose(-1, -2) @ vg  # (B, n, H, K, V)
        h = scan(torch.exp2(total).transpose(-1, -2), local, h_init)  # (B, n + 1, H, K, V)
        o = ch.unpack((o + (qg * torch.exp2(cum)) @ h[:, :-1]).transpose(2, 3))
        firsts = h[:, : len(block_lengths)] if starts else None  # (B, n_blocks, H, Dk, Dv)
        return (o, firsts, h[:, -1]) if final else (o, firsts)

    @staticmethod
    def _in_block(q, k, v, g2, cum, visible):
        """Both directions inside every group at once: q, k (..., S, Dk), v (..., S, Dv), the
        log2 gates g2 and their running sum cum from the group's start (..., S, Dk); returns
        (..., S, Dv). `visible`: the (S, S) pairs that see each other when a group holds
        several blocks, else None."""
        S = q.shape[-2]
        lower = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()[:, :, None]
        before = cum - g2  # the running sum before each token
        seg = torch.where(lower, cum[..., :, None, :] - cum[..., None, :, :],  # forward: (s, t]
                          before[..., None, :, :] - before[..., :, None, :])  # backward: [t, s)
        if visible is not None:  # no backward reach across the blocks of a group
            seg = seg.masked_fill(~visible[:, :, None], float("-inf"))
        att = (q[..., :, None, :] * k[..., None, :, :] * torch.exp2(seg)).sum(-1)  # (..., t, s)
        return att @ v

    def forward_blockwise_loop(self, x, block_lengths):
        """Block by block: the pairwise decayed form inside the block plus the carried state;
        the reference of the chunked form."""
        B, T, _ = x.shape
        q, k, v, gk = self._proj(x)
        qf, kf, vf = q.float() / math.sqrt(self.head_dim), k.float(), v.float()
        h = torch.zeros(B, self.n_heads, self.head_dim, self.head_dim, device=x.device)
        outs, start = [], 0
        for g in block_lengths:
            sl = slice(start, start + g)
            start += g
            qb, kb, vb, gb = qf[:, sl], kf[:, sl], vf[:, sl], gk[:, sl]
            cum = gb.cumsum(1)  # (B, g, H, Dk)
            diff = cum[:, :, None] - cum[:, None, :]  # (B, t, s, H, Dk)
            idx = torch.arange(g, device=x.device)
            lower = (idx[None, :] <= idx[:, None])[None, :, :, None, None]
            upper = (idx[None, :] > idx[:, None])[None, :, :, None, None]
            fwd = torch.exp(diff.masked_fill(~lower, float("-inf")))
            bwd = torch.exp((-diff + gb[:, :, None] - gb[:, None, :]).masked_fill(~upper, float("-inf")))
            att = torch.einsum("bthk,btshk,bshk->btsh", qb, fwd + bwd, kb)
            o = torch.einsum("btsh,bshv->bthv", att, vb)
            o = o + torch.einsum("bthk,bhkv->bthv", qb * torch.exp(cum), h)
            outs.append(o)
            tail = torch.exp(cum[:, -1:] - cum)  # decay from s to the block end, per key dim
            h = h * torch.exp(cum[:, -1])[..., None] + torch.einsum("bshk,bshv->bhkv", kb * tail, vb)
        o = torch.cat(outs, dim=1)
        return self.wo(o.reshape(B, T, -1).to(x.dtype))
