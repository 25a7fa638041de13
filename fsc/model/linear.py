"""Linear-attention mixer: feature map φ on q and k, floored normaliser, no decay."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fsc import ops
from fsc.kernels.linear.reference import FEATURE_MAPS
from fsc.mixers import linear as spec
from fsc.model import fla_scan
from fsc.model.cache import LayerCache
from fsc.model.chunked import Chunks
from fsc.model.layers import block_ids
from fsc.model.mixer import FixedState

CHUNK = 32  # tokens a chunk of the training form holds (whole blocks, at least one)


class LinearAttention(FixedState):
    kind = "linear"
    carries = True  # on torch (the chunked forms)
    backends = ("torch", "fla")  # its training forms on fla: fsc/model/fla_scan.py

    def __init__(self, recipe, dtype, state_dtype):
        super().__init__(recipe.d_model, dtype, state_dtype)
        cfg = recipe.linear
        self.n_heads, self.head_dim, self.feature_dim = spec.dims(cfg, recipe.d_model)  # H, Dv, r
        self.feature_map = cfg.feature_map
        self.eps = cfg.eps
        d, h = recipe.d_model, self.n_heads
        self.wq = nn.Linear(d, h * self.feature_dim, bias=False)
        self.wk = nn.Linear(d, h * self.feature_dim, bias=False)
        self.wv = nn.Linear(d, h * self.head_dim, bias=False)
        self.wo = nn.Linear(h * self.head_dim, d, bias=False)

    def cache_shapes(self, batch, capacity):
        # fp32 whatever state_dtype says: nothing decays these sums, and a bf16 sum (8 bits)
        # stops growing at about 256 times its terms (over 1024 tokens z ends at half its value
        # and the outputs are 100% off)
        h, r, dv = self.n_heads, self.feature_dim, self.head_dim
        return {
            "state": ((batch, h, r, dv), torch.float32),
            "z": ((batch, h, r), torch.float32),
        }

    def _qkv(self, x):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.feature_dim)
        k = self.wk(x).view(B, T, self.n_heads, self.feature_dim)
        v = self.wv(x).view(B, T, self.n_heads, self.head_dim)
        return q, k, v

    def _block(self, x, cache: LayerCache, commit: bool):
        B, G, _ = x.shape
        q, k, v = self._qkv(x)
        st, z = cache.tensors["state"], cache.tensors["z"]
        o = ops.linear_block(q, k, v, st, z, self.feature_map, self.eps,
                   st if commit else None, z if commit else None)
        return self.wo(o.reshape(B, G, -1).to(x.dtype))

    def _features(self, x):
        """φ(q), φ(k) (B, T, H, r) and v with a column of ones for the normaliser
        (B, T, H, Dv + 1), fp32."""
        q, k, v = self._qkv(x)
        phi = FEATURE_MAPS[self.feature_map]
        return phi(q.float()), phi(k.float()), F.pad(v.float(), (0, 1), value=1.0)

    def _read(self, out, dtype):
        """wo of the normalised numerators out (B, T, H, Dv + 1), the normaliser last."""
        o = out[..., :-1] / out[..., -1:].clamp_min(self.eps)
        return self.wo(o.flatten(2).to(dtype))

    def forward_blockwise(self, x, block_lengths):
        """In chunks of whole blocks: inside a chunk the block-causal quadratic form φ(q)φ(k)ᵀ,
        plus the sums of the earlier chunks (an exclusive cumsum over chunks, no loop). The
        normaliser rides along as a column of ones beside v. On fla: chunk_simple_gla without
        a gate."""
        fq, fk, v1 = self._features(x)
        if self.backend == "fla":
            o = fla_scan.blockwise(fla_scan.SCALAR_DECAY, fq, fk, v1, None, block_lengths, 1.0)
            return self._read(o, x.dtype)
        return self._read(self._chunked(fq, fk, v1, block_lengths), x.dtype)

    def _chunked(self, fq, fk, v1, block_lengths, h_init=None, final=False):
        """The chunked form's numerators (B, T, H, Dv + 1), the sums before the sequence
        `h_init` (B, H, r, Dv + 1; zeros by default); with `final`, also the sums at its end."""
        ch = Chunks(block_lengths, max(1, CHUNK // max(block_lengths)), fq.device)
        fq, fk, v1 = ch.pack(fq), ch.pack(fk), ch.pack(v1)  # (B, n, C, H, ·)
        att = torch.einsum("bcthr,bcshr->bchts", fq, fk)
        att = att.masked_fill(~(ch.causal | ch.later_in_block), 0.0)  # earlier blocks, own block
        out = torch.einsum("bchts,bcshd->bcthd", att, v1)
        kv = torch.einsum("bcshr,bcshd->bchrd", fk, v1)  # (B, n, H, r, Dv + 1): each chunk's sums
        before = torch.cat([torch.zeros_like(kv[:, :1]), kv[:, :-1]], 1).cumsum(1)
        if h_init is not None:
            before = before + h_init[:, None]
        out = ch.unpack(out + torch.einsum("bcthr,bchrd->bcthd", fq, before))  # (B, T, H, Dv + 1)
        return (out, before[:, -1] + kv[:, -1]) if final else out

    def forward_blockwise_from(self, x, block_lengths, start, at=0):
        """`forward_blockwise` (the chunked form) after a prefix that left `start`, and the
        sums it ends in (see `Mixer.forward_blockwise_from`)."""
        out, end = self._chunked(*self._features(x), block_lengths, self._sums(start), final=True)
        return self._read(out, x.dtype), self._end(end)

    def forward_two_stream(self, x_clean, x_noised, blocks):
        """Each noised block reads the clean blocks' sums before its block (an exclusive
        cumsum over the clean blocks) and all of itself."""
        if self.backend != "fla":
            return self.forward_two_stream_from(x_clean, x_noised, blocks, None)[:2]
        clean, noised = ((*self._features(x), None, None) for x in (x_clean, x_noised))
        oc, on = fla_scan.two_stream(fla_scan.SCALAR_DECAY, clean, noised, blocks, 1.0)
        return self._read(oc, x_clean.dtype), self._read(on, x_noised.dtype)

    def forward_two_stream_from(self, x_clean, x_noised, blocks, start):
        """`forward_two_stream` (the chunked form) after a prefix that left `start`, and the
        sums the clean stream ends in (see `Mixer.forward_two_stream_from`)."""
        B, T, _ = x_clean.shape
        K = blocks.shape[1]
        G = x_noised.shape[1] // K
        h0 = self._sums(start)
        fq, fk, v1 = self._features(x_clean)
        y_clean = self._read(self._chunked(fq, fk, v1, [G] * (T // G), h0), x_clean.dtype)
        kv = torch.einsum("bngHr,bngHd->bnHrd", fk.unflatten(1, (T // G, G)), v1.unflatten(1, (T // G, G)))
        before = torch.cat([torch.zeros_like(kv[:, :1]), kv[:, :-1]], 1).cumsum(1)  # (B, nb, H, r, Dv + 1)
        if h0 is not None:
            before = before + h0[:, None]
        fq, fk, v1 = (t.unflatten(1, (K, G)) for t in self._features(x_noised))  # (B, K, G, H, ·)
        out = torch.einsum("bkthr,bkshr,bkshd->bkthd", fq, fk, v1)
        state = before[torch.arange(B, device=blocks.device)[:, None], blocks]  # (B, K, H, r, Dv + 1)
        out = out + torch.einsum("bkthr,bkhrd->bkthd", fq, state)
        end = self._end(before[:, -1] + kv[:, -1])
        return y_clean, self._read(out.flatten(1, 2), x_noised.dtype), end

    @staticmethod
    def _sums(start):
        """The sums (B, H, r, Dv + 1) of a `start`, the normaliser's last (None: zeros)."""
        if start is None:
            return None
        return torch.cat([start["state"], start["z"][..., None]], -1).float()

    @staticmethod
    def _end(sums):
        """The cache's tensors (fp32, see `cache_shapes`) of the sums (B, H, r, Dv + 1)."""
        return {"state": sums[..., :-1].float(), "z": sums[..., -1].float()}

    def forward_blockwise_loop(self, x, block_lengths):
        """Per-block sums of φ(k)vᵀ and φ(k), inclusive cumsum over blocks, one read per token:
        the reference of the chunked form."""
        B, T, _ = x.shape
        q, k, v = self._qkv(x)
        phi = FEATURE_MAPS[self.feature_map]
        fq, fk, vf = phi(q.float()), phi(k.float()), v.float()
        ids = block_ids(block_lengths, x.device)
        nb = len(block_lengths)
        kv = torch.zeros(B, nb, self.n_heads, self.feature_dim, self.head_dim, device=x.device)
        kv.index_add_(1, ids, torch.einsum("bthr,bthd->bthrd", fk, vf))
        ks = torch.zeros(B, nb, self.n_heads, self.feature_dim, device=x.device)
        ks.index_add_(1, ids, fk)
        S, Z = kv.cumsum(1)[:, ids], ks.cumsum(1)[:, ids]  # (B, T, H, r, Dv), (B, T, H, r)
        num = torch.einsum("bthr,bthrd->bthd", fq, S)
        den = torch.einsum("bthr,bthr->bth", fq, Z).clamp_min(self.eps)
        return self.wo((num / den[..., None]).reshape(B, T, -1).to(x.dtype))

    def _synthetic_fill(self, name, t, generator):
        # A real prefix has z = Σ φ(k) > 0 and φ(k)vᵀ sums of matching size.
        t.uniform_(0.5, 1.5, generator=generator) if name == "z" else t.normal_(0, 1, generator=generator)
