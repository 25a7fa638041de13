"""Attention mixer: MHA/GQA with RoPE or no position encoding (NoPE), optionally gated at its
output; the block sees the cached prefix (or, with a sliding window, its last `window` tokens)
and all of itself."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fsc import ops
from fsc.mixers import attention as spec
from fsc.model.cache import LayerCache
from fsc.model.layers import RMSNorm, block_ids, noised_positions, rope
from fsc.model.mixer import Mixer


def log_scaled(q, positions, length: int):
    """q (B, T, H, D) at `positions` ((T,) or (B, T), or a `range`), each query past `length`
    multiplied by log(p + 1) / log(length): `AttentionCfg.logn`."""
    if isinstance(positions, range):
        if positions.stop <= length:  # every query within the length: unchanged
            return q
        positions = torch.arange(positions.start, positions.stop, device=q.device)
    keys = positions.to(torch.float32) + 1
    factor = torch.where(keys > length, keys.log() / math.log(length), 1.0)  # 1 exactly within
    return (q.float() * factor[..., None, None]).to(q.dtype)


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
        # Sliding window: the cache is a ring of `window` slots (position p in slot p % window),
        # a fixed state rather than a growing one.
        self.window = cfg.window
        self.growing = cfg.window is None
        self.logn = cfg.logn

    def cache_shapes(self, batch, capacity):
        slots = capacity if self.window is None else self.window
        shape = (batch, slots, self.n_kv_heads, self.head_dim)
        return {"k": (shape, self.act_dtype), "v": (shape, self.act_dtype)}

    def _qkv(self, x, positions, upto: int):
        """q, k (rotated), v of x (B, T, d) at `positions` (a tensor, or a `range`), every one
        below `upto`."""
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.logn is not None:
            q = log_scaled(q, positions, self.logn)
        if self.theta is None:
            return q, k, v
        return (rope(q, positions, self.theta, self.scaling, self.rope_dims, upto),
                rope(k, positions, self.theta, self.scaling, self.rope_dims, upto), v)

    def _block(self, x, cache: LayerCache, commit: bool):
        G = x.shape[1]
        S = cache.length
        if self.window is not None:
            return self._window_block(x, cache, commit)
        if commit and S + G > cache.capacity:
            raise ValueError(f"attention cache is full: S {S} + G {G} exceeds capacity {cache.capacity}")
        if cache.at is not None:
            return self._static_block(x, cache, commit)
        if cache.pads is not None:
            return self._ragged_block(x, cache, commit)
        q, k, v = self._qkv(x, range(S, S + G), S + G)  # (B, G, H|Hkv, D)
        kc, vc = cache.tensors["k"], cache.tensors["v"]
        k, v = k.to(kc.dtype), v.to(vc.dtype)
        if commit:  # written first, so the op reads the block where it lies: after the prefix
            kc[:, S : S + G] = k
            vc[:, S : S + G] = v
            k, v = kc[:, S : S + G], vc[:, S : S + G]
        o = ops.block_attention(q, kc, vc, k, v, S, 1 / math.sqrt(self.head_dim))
        return self._out(o, x)

    def _static_block(self, x, cache: LayerCache, commit: bool):
        """The block against the whole cache, the length read on the device (`cache.at`): the
        prefix keys below it (and, ragged, from each row's start on), the block's own keys,
        positions from it; a fold writes the block at it and moves it on. The same attention
        as `_block`'s, with the same operations at every length, so that one captured CUDA
        graph serves every block (fsc.graphs)."""
        G, cap = x.shape[1], cache.capacity
        at = cache.at + torch.arange(G, device=x.device)  # the block's slots
        pos = at if cache.pads is None else at[None] - cache.pads[:, None]
        q, k, v = self._qkv(x, pos, cap)
        kc, vc = cache.tensors["k"], cache.tensors["v"]
        k, v = k.to(kc.dtype), v.to(vc.dtype)
        keys = torch.arange(cap, device=x.device)
        before = keys < cache.at  # (cap,): the prefix
        if cache.pads is not None:
            before = before[None] & (keys[None] >= cache.pads[:, None])  # (B, cap)
        prefix = before[..., None, :].expand(*before.shape[:-1], G, cap)
        own = torch.ones(*prefix.shape[:-1], G, dtype=torch.bool, device=x.device)
        ops.ran_torch("block_attention")
        out = self._attend(q, torch.cat([kc, k], 1), torch.cat([vc, v], 1),
                           torch.cat([prefix, own], -1), x)
        if commit:
            kc.index_copy_(1, at, k)
            vc.index_copy_(1, at, v)
            cache.at += G
        return out

    def _ragged_block(self, x, cache: LayerCache, commit: bool):
        """The block of rows whose prefixes begin `cache.pads` positions late (right-aligned
        by `fsc.model.cache.merge_rows`): each row's positions count from its own start, and
        its queries never read the padding before it; the same attention as the row's alone."""
        G, S = x.shape[1], cache.length
        q, k, v = self._qkv(x, cache.positions(G), S + G)
        kc, vc = cache.tensors["k"], cache.tensors["v"]
        k, v = k.to(kc.dtype), v.to(vc.dtype)
        if commit:
            kc[:, S : S + G] = k
            vc[:, S : S + G] = v
        keys = torch.arange(S + G, device=x.device)
        allowed = (keys[None] >= cache.pads[:, None])[:, None, :].expand(-1, G, -1)  # (B, G, S+G)
        ops.ran_torch("block_attention")
        return self._attend(q, torch.cat([kc[:, :S], k], 1), torch.cat([vc[:, :S], v], 1),
                            allowed, x)

    def fold_blocks(self, x, block_lengths: list[int], cache: LayerCache):
        """The blocks' keys and values written into the cache, then one masked pass: each
        token reads the cached prefix, the blocks before its own and its own block."""
        if self.window is not None:
            return super().fold_blocks(x, block_lengths, cache)
        T, S = x.shape[1], cache.length
        if S + T > cache.capacity:
            raise ValueError(f"attention cache is full: S {S} + {T} tokens exceed capacity {cache.capacity}")
        q, k, v = self._qkv(x, range(S, S + T), S + T)
        kc, vc = cache.tensors["k"], cache.tensors["v"]
        kc[:, S : S + T] = k.to(kc.dtype)
        vc[:, S : S + T] = v.to(vc.dtype)
        cache.length += T
        if S == 0 and max(block_lengths) == 1:  # a prompt from the start, one token a block
            return self._attend(q, kc[:, :T], vc[:, :T], None, x)
        ids = block_ids(block_lengths, x.device)
        allowed = torch.cat([torch.ones(T, S, dtype=torch.bool, device=x.device),
                             ids[None, :] <= ids[:, None]], 1)
        return self._attend(q, kc[:, : S + T], vc[:, : S + T], allowed, x)

    def _window_block(self, x, cache: LayerCache, commit: bool):
        """The block against the last `window` tokens before it, read from the ring in order
        of position (the same op as the whole prefix); a fold writes the block's last
        `window` tokens into their slots."""
        G, S, W = x.shape[1], cache.length, self.window
        q, k, v = self._qkv(x, torch.arange(S, S + G, device=x.device), S + G)
        ring_k, ring_v = cache.tensors["k"], cache.tensors["v"]
        n = min(S, W)
        slots = torch.arange(S - n, S, device=x.device) % W
        o = ops.block_attention(q, ring_k[:, slots], ring_v[:, slots], k.to(ring_k.dtype),
                     v.to(ring_v.dtype), n, 1 / math.sqrt(self.head_dim))
        if commit:
            keep = min(G, W)
            slots = torch.arange(S + G - keep, S + G, device=x.device) % W
            ring_k[:, slots] = k[:, G - keep :].to(ring_k.dtype)
            ring_v[:, slots] = v[:, G - keep :].to(ring_v.dtype)
        return self._out(o, x)

    def _reach(self, allowed, key_pos, block_start):
        """`allowed` narrowed to the window: a query whose block starts at block_start [..., Tq]
        reads the keys at positions key_pos [Tk] from block_start - window on."""
        if self.window is None:
            return allowed
        return allowed & (key_pos >= block_start[..., None] - self.window)

    def _out(self, o, x):
        """wo of the heads' output o (B, T, H, D) for the inputs x (B, T, d); with
        `output_gate`, o is first multiplied by sigmoid(wg x)."""
        o = o.reshape(*x.shape[:2], -1).to(x.dtype)
        if self.wg is not None:
            o = o * torch.sigmoid(self.wg(x))
        return self.wo(o)

    def _attend(self, q, k, v, allowed, x):
        """fp32 softmax attention of q (B, Tq, H, D) over k, v (B, Tk, Hkv, D) where `allowed`
        ([B,] Tq, Tk) says so, or with `allowed` None causally (Tq = Tk: the kernel's own
        causal form, no mask to read), fused (the training path's hot spot); its output
        (`_out`) for the queries' inputs x, (B, Tq, d)."""
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        mask = None if allowed is None else allowed if allowed.ndim == 2 else allowed[:, None]
        o = F.scaled_dot_product_attention(
            q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2),
            attn_mask=mask, is_causal=allowed is None,
            scale=1 / math.sqrt(self.head_dim)).transpose(1, 2)
        return self._out(o, x)

    def forward_blockwise(self, x, block_lengths):
        T = x.shape[1]
        pos = torch.arange(T, device=x.device)
        q, k, v = self._qkv(x, pos, T)
        if self.window is None and max(block_lengths) == 1:  # blocks of one token: causal
            return self._attend(q, k, v, None, x)
        ids = block_ids(block_lengths, x.device)
        lengths = torch.tensor(block_lengths, device=x.device)
        start = (torch.cumsum(lengths, 0) - lengths)[ids]  # where each token's block starts
        allowed = self._reach(ids[None, :] <= ids[:, None], pos, start)  # earlier blocks, own block
        return self._attend(q, k, v, allowed, x)

    def forward_two_stream(self, x_clean, x_noised, blocks):
        """The clean stream block-causally; each noised block's queries see the clean keys
        before its block and its own keys, at the positions of its clean twin."""
        T, K = x_clean.shape[1], blocks.shape[1]
        G = x_noised.shape[1] // K
        clean_pos = torch.arange(T, device=x_clean.device)
        q, k, v = self._qkv(x_clean, clean_pos, T)
        ids = clean_pos // G
        y_clean = self._attend(q, k, v, self._reach(ids[None, :] <= ids[:, None], clean_pos, ids * G),
                               x_clean)
        qn, kn, vn = self._qkv(x_noised, noised_positions(blocks, G), T)
        unit = torch.arange(K * G, device=blocks.device) // G
        block = blocks.repeat_interleave(G, 1)  # (B, K·G): each noised query's block
        before = self._reach(ids[None, None, :] < block[..., None], clean_pos, block * G)  # (B, K·G, T)
        own = (unit[:, None] == unit[None, :]).expand(len(blocks), -1, -1)  # (B, K·G, K·G)
        y_noised = self._attend(qn, torch.cat([k, kn], 1), torch.cat([v, vn], 1),
                                torch.cat([before, own], -1), x_noised)
        return y_clean, y_noised
