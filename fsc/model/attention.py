"""Attention mixer: MHA/GQA with RoPE or no position encoding (NoPE), optionally gated at its
output; the block sees the cached prefix and all of itself."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fsc import ops
from fsc.mixers import attention as spec
from fsc.model.cache import LayerCache
from fsc.model.layers import RMSNorm, block_ids, rope
from fsc.model.mixer import Mixer


class Attention(Mixer):
    kind = "attention"
    growing = True

    def __init__(self, recipe, dtype, state_dtype):
        super().__init__(recipe.d_model, dtype, state_dtype)
        cfg = recipe.attention
        self.n_heads, self.n_kv_heads, self.head_dim = spec.dims(cfg, recipe.d_model)
        self.theta = cfg.rope_theta if cfg.position == "rope" else None  # None: NoPE
        self.scaling, self.rope_dims = cfg.rope_scaling, cfg.rope_dims
        d, h, hkv, hd = recipe.d_model, self.n_heads, self.n_kv_heads, self.head_dim
        qkv_bias, o_bias = cfg.bias != "none", cfg.bias == "qkvo"
        self.wq = nn.Linear(d, h * hd, bias=qkv_bias)
        self.wk = nn.Linear(d, hkv * hd, bias=qkv_bias)
        self.wv = nn.Linear(d, hkv * hd, bias=qkv_bias)
        self.wo = nn.Linear(h * hd, d, bias=o_bias)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(hd, recipe.norm_eps, recipe.norm_offset)
            self.k_norm = RMSNorm(hd, recipe.norm_eps, recipe.norm_offset)
        else:
            self.q_norm = self.k_norm = None
        self.wg = nn.Linear(d, h * hd, bias=qkv_bias) if cfg.output_gate else None

    def cache_shapes(self, batch, capacity):
        shape = (batch, capacity, self.n_kv_heads, self.head_dim)
        return {"k": (shape, self.act_dtype), "v": (shape, self.act_dtype)}

    def _qkv(self, x, positions):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.theta is None:
            return q, k, v
        return (rope(q, positions, self.theta, self.scaling, self.rope_dims),
                rope(k, positions, self.theta, self.scaling, self.rope_dims), v)

    def _block(self, x, cache: LayerCache, commit: bool):
        G = x.shape[1]
        S = cache.length
        if commit and S + G > cache.capacity:
            raise ValueError(f"attention cache is full: S {S} + G {G} exceeds capacity {cache.capacity}")
        positions = torch.arange(S, S + G, device=x.device)
        q, k, v = self._qkv(x, positions)  # (B, G, H|Hkv, D)
        kc, vc = cache.tensors["k"], cache.tensors["v"]
        o = ops.call("block_attention", q, kc, vc, k.to(kc.dtype), v.to(vc.dtype), S, 1 / math.sqrt(self.head_dim))
        if commit:
            kc[:, S : S + G] = k.to(kc.dtype)
            vc[:, S : S + G] = v.to(vc.dtype)
        return self._out(o, x)

    def _out(self, o, x):
        """wo of the heads' output o (B, T, H, D) for the inputs x (B, T, d); with
        `output_gate`, o is first multiplied by sigmoid(wg x)."""
        o = o.reshape(*x.shape[:2], -1).to(x.dtype)
        if self.wg is not None:
            o = o * torch.sigmoid(self.wg(x))
        return self.wo(o)

    def _attend(self, q, k, v, allowed, x):
        """fp32 softmax attention of q (B, Tq, H, D) over k, v (B, Tk, Hkv, D) where `allowed`
        ([B,] Tq, Tk) says so, fused (the training path's hot spot); its output (`_out`) for
        the queries' inputs x, (B, Tq, d)."""
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        mask = allowed if allowed.ndim == 2 else allowed[:, None]  # one mask for every head
        o = F.scaled_dot_product_attention(
            q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2),
            attn_mask=mask, scale=1 / math.sqrt(self.head_dim)).transpose(1, 2)
        return self._out(o, x)

    def forward_blockwise(self, x, block_lengths):
        T = x.shape[1]
        q, k, v = self._qkv(x, torch.arange(T, device=x.device))
        ids = block_ids(block_lengths, x.device)
        return self._attend(q, k, v, ids[None, :] <= ids[:, None], x)  # earlier blocks, own block

    def forward_two_stream(self, x_clean, x_noised, blocks):
        """The clean stream block-causally; each noised block's queries see the clean keys
        before its block and its own keys, at the positions of its clean twin."""
        T, K = x_clean.shape[1], blocks.shape[1]
        G = x_noised.shape[1] // K
        q, k, v = self._qkv(x_clean, torch.arange(T, device=x_clean.device))
        ids = torch.arange(T, device=x_clean.device) // G
        y_clean = self._attend(q, k, v, ids[None, :] <= ids[:, None], x_clean)
        at = torch.arange(G, device=blocks.device)
        pos = (blocks[..., None] * G + at).flatten(1)  # (B, K·G): the twin's positions
        qn, kn, vn = self._qkv(x_noised, pos)
        unit = torch.arange(K * G, device=blocks.device) // G
        before = ids[None, None, :] < blocks.repeat_interleave(G, 1)[..., None]  # (B, K·G, T)
        own = (unit[:, None] == unit[None, :]).expand(len(blocks), -1, -1)  # (B, K·G, K·G)
        y_noised = self._attend(qn, torch.cat([k, kn], 1), torch.cat([v, vn], 1),
                                torch.cat([before, own], -1), x_noised)
        return y_clean, y_noised


MIXER = Attention
