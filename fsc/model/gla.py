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
from fsc.model.chunked import Chunks
from fsc.model.mixer import FixedState

# The training form's pairs carry a key axis: tokens pair inside a group of whole blocks of at
# least GROUP tokens (B·T·S·H·K values), groups pair inside a chunk of CHUNK_GROUPS groups.
GROUP = 4
CHUNK_GROUPS = 8


def _chunk_gla(q, k, v, g, beta, scale, **varlen):
    o, _ = fla_scan.fla_ops().chunk_gla(q, k, v, g, scale=scale, **varlen)
    return o


# The training forms on fla: a gate per key dimension, g [B, T, H, K] (fsc/model/fla_scan.py).
PER_KEY_DECAY = fla_scan.Recurrence(_chunk_gla)


class GLA(FixedState):
    kind = "gla"
    carries = True  # on torch (the chunked forms)

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
        o = ops.call("gla_block", q, k, v, gk, st, 1 / math.sqrt(self.head_dim), st if commit else None)
        return self.wo(o.reshape(B, G, -1).to(x.dtype))

    def forward_blockwise(self, x, block_lengths):
        """In chunks of whole blocks, and inside a chunk in groups of whole blocks (at least
        GROUP tokens). Inside each group both directions as one pairwise decayed form (the gate
        is per key dimension, so pairs carry a key axis; the backward scan stays in its block);
        the state each group starts from, from the chunk's earlier groups, as a masked product
        over group pairs; the forward state carried from chunk to chunk. On fla: chunk_gla
        (`PER_KEY_DECAY`)."""
        q, k, v, gk = self._proj(x)
        if self.backend == "fla":
            o = fla_scan.blockwise(PER_KEY_DECAY, q, k, v, gk, block_lengths, 1 / math.sqrt(self.head_dim))
            return self.wo(o.flatten(2).to(x.dtype))
        o, _ = self._chunked(q, k, v, gk, block_lengths, max(1, GROUP // max(block_lengths)))
        return self.wo(o.flatten(2).to(x.dtype))

    def forward_blockwise_from(self, x, block_lengths, start):
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

        def units(t):  # (B, K·G, H, D) -> (B, 1, K, G, H, D): one chunk of K one-block groups
            return t.float().unflatten(1, (K, G))[:, None]

        qb, kb, vb, gb = units(q / math.sqrt(self.head_dim)), units(k), units(v), units(gk)
        cum = gb.cumsum(3)  # (B, 1, K, G, H, Dk)
        h = starts[torch.arange(B, device=blocks.device)[:, None], blocks][:, None]  # (B, 1, K, H, Dk, Dv)
        on = self._in_block(qb, kb, vb, gb, cum, None)
        on = on + torch.einsum("bcmthk,bcmhkv->bcmthv", qb * torch.exp(cum), h)
        return (self.wo(o.flatten(2).to(x_clean.dtype)),
                self.wo(on.flatten(1, 3).flatten(2).to(x_noised.dtype)),
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
        ch = Chunks(block_lengths, CHUNK_GROUPS * per, q.device, unit=per)
        S = per * ch.G  # tokens a group holds
        mg = ch.m // per  # groups a chunk holds
        visible = (ch.causal | ch.later_in_block)[:S, :S]  # the same in every group

        def blocks(t):  # (B, T, H, D) -> (B, n, mg, S, H, D)
            return ch.pack(t).unflatten(2, (mg, S))

        qb, kb, vb = blocks(q.float() / math.sqrt(self.head_dim)), blocks(k.float()), blocks(v.float())
        gb = blocks(gk)
        cum = gb.cumsum(3)  # (B, n, mg, S, H, K): log gate from the group's start, inclusive
        o = self._in_block(qb, kb, vb, gb, cum, None if per == 1 else visible)
        total = cum[:, :, :, -1]  # (B, n, mg, H, K): log gate over each whole group
        local = torch.einsum("bcmshk,bcmshv->bcmhkv", kb * torch.exp(total[:, :, :, None] - cum), vb)
        # group i of a chunk starts from groups j < i decayed over the groups between them; the
        # extra row i = mg is what the chunk hands on. fp64 running sums: exact segment sums.
        run = total.double().cumsum(2)  # (B, n, mg, H, K)
        start = torch.cat([run - total, run[:, :, -1:]], 2)  # (B, n, mg + 1, H, K): before group i
        i, j = torch.arange(mg + 1, device=q.device)[:, None], torch.arange(mg, device=q.device)
        seg = (start[:, :, :, None] - run[:, :, None]).float()  # (B, n, i, j, H, K)
        pair = torch.exp(seg.masked_fill(~(j < i)[..., None, None], float("-inf")))
        h_in = torch.einsum("bcijhk,bcjhkv->bcihkv", pair, local)  # (B, n, mg + 1, H, K, V)
        h = torch.zeros_like(h_in[:, 0, 0]) if h_init is None else h_init  # (B, H, K, V)
        carried = []
        for dec_c, add in zip(torch.exp(start[:, :, -1].float()).unbind(1), h_in[:, :, -1].unbind(1)):
            carried.append(h)
            h = h * dec_c[..., None] + add
        h0 = torch.stack(carried, 1)  # (B, n, H, K, V): the state each chunk starts from
        from_chunk = torch.exp(cum + start[:, :, :-1, None].float())  # decay from the chunk's start
        o = o + torch.einsum("bcmthk,bcmhkv->bcmthv", qb * torch.exp(cum), h_in[:, :, :-1])
        o = o + torch.einsum("bcmthk,bchkv->bcmthv", qb * from_chunk, h0)
        o = ch.unpack(o.flatten(2, 3))
        firsts = None
        if starts:
            into = torch.exp(start[:, :, :-1].float())[..., None]  # from the chunk's start
            firsts = (h_in[:, :, :-1] + into * h0[:, :, None]).flatten(1, 2)
            firsts = firsts[:, : len(block_lengths)]  # (B, n_blocks, H, Dk, Dv)
        return (o, firsts, h) if final else (o, firsts)

    @staticmethod
    def _in_block(qb, kb, vb, gb, cum, visible):
        """Both directions inside every group at once: (B, n, mg, S, H, Dv). `visible`: the
        (S, S) pairs that see each other when a group holds several blocks, else None."""
        S = qb.shape[3]
        diff = cum[:, :, :, :, None] - cum[:, :, :, None]  # (B, n, mg, t, s, H, K)
        idx = torch.arange(S, device=qb.device)
        lower = (idx[None, :] <= idx[:, None])[:, :, None, None]
        gt, gs = gb[:, :, :, :, None], gb[:, :, :, None]
        seg = torch.where(lower, diff, gt - gs - diff)  # forward over (s, t], backward over [t, s)
        if visible is not None:  # no backward reach across the blocks of a group
            seg = seg.masked_fill(~visible[:, :, None, None], float("-inf"))
        att = torch.einsum("bcmthk,bcmtshk,bcmshk->bcmtsh", qb, torch.exp(seg), kb)
        return torch.einsum("bcmtsh,bcmshv->bcmthv", att, vb)

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


MIXER = GLA
