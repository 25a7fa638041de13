"""Gated linear attention: per-key-dimension forget gate, forward and in-block backward scans."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fsc import ops
from fsc.mixers import gla as spec
from fsc.model.cache import LayerCache
from fsc.model.mixer import Mixer


class GLA(Mixer):
    kind = "gla"

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
        """Per block: the pairwise decayed form inside the block plus the carried state."""
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

    def _synthetic_fill(self, name, t, generator):
        t.normal_(0.0, 0.5, generator=generator)


MIXER = GLA
