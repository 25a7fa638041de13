"""Gated DeltaNet mixer: the delta rule with a scalar per-head decay; forward scan from the
cached state, backward scan inside the block from zero (see fsc/mixers/gated_delta.py)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fsc import ops
from fsc.mixers import gated_delta as spec
from fsc.model import fla_scan
from fsc.model.cache import LayerCache
from fsc.model.chunked import Chunks, decay_matrix
from fsc.model.mixer import Mixer

CHUNK = 16  # tokens a chunk of the training form holds (whole blocks, at least one)


class GatedDelta(Mixer):
    kind = "gated_delta"
    backends = ("torch", "fla")

    def __init__(self, recipe, dtype, state_dtype):
        super().__init__(recipe.d_model, dtype, state_dtype)
        self.n_heads, self.head_dim = spec.dims(recipe.gated_delta, recipe.d_model)
        d, h, hd = recipe.d_model, self.n_heads, self.head_dim
        self.wq = nn.Linear(d, h * hd, bias=False)
        self.wk = nn.Linear(d, h * hd, bias=False)
        self.wv = nn.Linear(d, h * hd, bias=False)
        self.wa = nn.Linear(d, h, bias=False)  # decay input, per head
        self.wb = nn.Linear(d, h, bias=False)  # write strength, per head
        self.A_log = nn.Parameter(torch.empty(h))
        self.dt_bias = nn.Parameter(torch.empty(h))
        self.wo = nn.Linear(h * hd, d, bias=False)

    def init_parameter(self, leaf, p, gen):
        """Mamba-2's decay: A in [1, 16], dt in [1e-3, 0.1] (stored as its inverse softplus)."""
        if leaf == "A_log":
            p.copy_(torch.empty(p.shape, device=p.device).uniform_(1, 16, generator=gen).log_())
        elif leaf == "dt_bias":
            lo, hi = math.log(1e-3), math.log(0.1)
            dt = torch.empty(p.shape, device=p.device).uniform_(lo, hi, generator=gen).exp_()
            p.copy_(dt + torch.log(-torch.expm1(-dt)))
        else:
            super().init_parameter(leaf, p, gen)

    def cache_shapes(self, batch, capacity):
        return {"state": ((batch, self.n_heads, self.head_dim, self.head_dim), self.state_dtype)}

    def _proj(self, x):
        """q, k (L2-normalised), v [B, T, H, D]; log decay g and write strength beta [B, T, H],
        fp32."""
        B, T, _ = x.shape
        shape = (B, T, self.n_heads, self.head_dim)
        q = F.normalize(self.wq(x).float().view(shape), dim=-1).to(x.dtype)
        k = F.normalize(self.wk(x).float().view(shape), dim=-1).to(x.dtype)
        v = self.wv(x).view(shape)
        g = -torch.exp(self.A_log.float()) * F.softplus(self.wa(x).float() + self.dt_bias.float())
        beta = torch.sigmoid(self.wb(x).float())
        return q, k, v, g, beta

    def _block(self, x, cache: LayerCache, commit: bool):
        B, G, _ = x.shape
        q, k, v, g, beta = self._proj(x)
        st = cache.tensors["state"]
        o = ops.call("gated_delta_block", q, k, v, g, beta, st, 1 / math.sqrt(self.head_dim),
                     st if commit else None)
        return self.wo(o.reshape(B, G, -1).to(x.dtype))

    def forward_blockwise(self, x, block_lengths):
        """The chunked (WY) form of the delta rule, in chunks of whole blocks.

        Inside a chunk, with D the pairwise decays (`decay_matrix`) and A = diag(beta)(K Kᵀ ⊙ D):
        the forward scan's writes u (v_t less what the state recalled at k_t) solve the lower
        unit-triangular system (I + tril(A, -1)) u = beta v − beta exp(cum) (K h), h the state
        the chunk starts from; the backward scan's writes u' solve the upper one
        (I + triu(A, 1)) u' = beta v (D is zero across blocks, so each block is its own system,
        from zero). Reads: o = exp(cum) Q h + tril(Q Kᵀ ⊙ D) u + triu(Q Kᵀ ⊙ D, 1) u'. Across
        chunks h ← exp(cum_C) h + Kᵀ(D_C ⊙ u), an affine map of h built before the loop. On
        fla: chunk_gated_delta_rule (fsc/model/fla_scan.py)."""
        q, k, v, g, beta = self._proj(x)
        if self.backend == "fla":
            o = fla_scan.blockwise("delta", q, k, v, g, block_lengths, 1 / math.sqrt(self.head_dim), beta)
        else:
            o = self._chunked(q, k, v, g, beta, block_lengths)
        return self.wo(o.flatten(2).to(x.dtype))

    def forward_two_stream(self, x_clean, x_noised, blocks):
        """The clean stream's chunked form also gives the state at every block end; each
        noised block is then a chunk of its own, starting from its clean twin's state."""
        if self.backend == "fla":
            clean, noised = (self._proj(x) for x in (x_clean, x_noised))
            oc, on = fla_scan.two_stream("delta", clean, noised, blocks, 1 / math.sqrt(self.head_dim))
            return self.wo(oc.flatten(2).to(x_clean.dtype)), self.wo(on.flatten(2).to(x_noised.dtype))
        B, T, _ = x_clean.shape
        K = blocks.shape[1]
        G = x_noised.shape[1] // K
        o, ends = self._chunked(*self._proj(x_clean), [G] * (T // G), ends=True)
        starts = torch.cat([torch.zeros_like(ends[:, :1]), ends[:, :-1]], 1)  # (B, nb, H, Dk, Dv)
        h = starts[torch.arange(B, device=blocks.device)[:, None], blocks]  # (B, K, H, Dk, Dv)
        on = self._chunked(*self._proj(x_noised), [G] * K, starts=h)
        return (self.wo(o.flatten(2).to(x_clean.dtype)), self.wo(on.flatten(2).to(x_noised.dtype)))

    def _chunked(self, q, k, v, g, beta, block_lengths, starts=None, ends=False):
        """o (B, T, H, Dv) of the chunked form. With `starts` (B, n_blocks, H, Dk, Dv) every
        block is a chunk of its own and starts from the state given (nothing carried); with
        `ends`, also the state at the end of every block, (B, n_blocks, H, Dk, Dv)."""
        G = max(block_lengths)
        ch = Chunks(block_lengths, 1 if starts is not None else max(1, CHUNK // G), q.device)
        dec = decay_matrix(ch.pack(g), ch)  # (B, n, H, t, s)

        def heads(t):  # (B, T, H, ...) -> (B, n, H, C, ...)
            return ch.pack(t).transpose(2, 3)

        q, k, v = heads(q.float() / math.sqrt(self.head_dim)), heads(k.float()), heads(v.float())
        beta, cum = heads(beta)[..., None], heads(g).cumsum(-1)  # (B, n, H, C, 1), (B, n, H, C)
        into = torch.exp(cum)[..., None]  # (B, n, H, C, 1): decay from the chunk's start
        kt = k.transpose(-1, -2)
        a = beta * (k @ kt) * dec  # (B, n, H, t, s)
        qk = (q @ kt) * dec
        # forward writes u = u0 − w h; backward writes ub (each block from zero). A solve reads
        # only its strict triangle of a (and back-propagates into it alone).
        rhs = torch.cat([beta * v, beta * into * k], -1)
        u0, w = torch.linalg.solve_triangular(a, rhs, upper=False,
                                              unitriangular=True).split([v.shape[-1], k.shape[-1]], -1)
        ub = torch.linalg.solve_triangular(a, beta * v, upper=True, unitriangular=True)
        seen = qk * ch.causal  # s <= t; the rest of qk is later in t's block
        o = seen @ u0 + (qk - seen) @ ub  # (B, n, H, C, Dv): the chunk's own writes
        read = q * into - seen @ w  # (B, n, H, C, Dk): o += read @ h
        # across chunks h ← M h + N, with M = exp(cum_C) I − (Kᵀ ⊙ D_C) w and N = (Kᵀ ⊙ D_C) u0
        kc = kt * dec[..., -1:, :]  # (B, n, H, Dk, C): each key decayed to the chunk's end
        if starts is None:
            eye = torch.eye(k.shape[-1], device=q.device)
            M = into[..., -1:, :] * eye - kc @ w  # (B, n, H, Dk, Dk)
            N = kc @ u0  # (B, n, H, Dk, Dv)
            h = torch.zeros_like(N[:, 0])  # (B, H, Dk, Dv)
            carried = []
            for M_c, N_c in zip(M.unbind(1), N.unbind(1)):
                carried.append(h)
                h = M_c @ h + N_c
            starts = torch.stack(carried, 1)  # (B, n, H, Dk, Dv): the state each chunk starts from
        o = ch.unpack((o + read @ starts).transpose(2, 3))  # (B, T, H, Dv)
        if not ends:
            return o
        # a block's last row of dec holds only the forward scan: the state at its end is
        # exp(cum) h0 + Σ_s k_s D(end, s) u_s, with the forward writes u = u0 − w h0
        last = slice(ch.G - 1, None, ch.G)
        u = u0 - w @ starts  # (B, n, H, C, Dv)
        h = torch.einsum("bchis,bchsk,bchsv->bcihkv", dec[..., last, :], k, u)  # (B, n, m, H, Dk, Dv)
        h = h + into[..., last, :].transpose(2, 3)[..., None] * starts[:, :, None]
        return o, h.flatten(1, 2)[:, : len(block_lengths)]

    def forward_blockwise_loop(self, x, block_lengths):
        """The delta rule in its matrix form h ← (I − beta k kᵀ) exp(g) h + beta k vᵀ, token by
        token: forward over the whole sequence, backward from zero inside each block, where a
        token reads the later tokens' state before its own write. The reference of the chunked
        form."""
        B, T, _ = x.shape
        q, k, v, g, beta = self._proj(x)
        q = q.float() / math.sqrt(self.head_dim)
        k, v = k.float(), v.float()
        eye = torch.eye(self.head_dim, device=x.device)
        a, bk = torch.exp(g)[..., None, None], beta[..., None, None] * k[..., :, None]

        def write(h, t):  # (B, H, Dk, Dv): token t's decay is applied by the caller
            return (eye - bk[:, t] * k[:, t, :, None, :]) @ h + bk[:, t] * v[:, t, :, None, :]

        def read(h, t):
            return (q[:, t, :, None, :] @ h).squeeze(-2)

        h = torch.zeros(B, self.n_heads, self.head_dim, self.head_dim, device=x.device)
        out = torch.empty(B, T, self.n_heads, self.head_dim, device=x.device)
        start = 0
        for n in block_lengths:
            for t in range(start, start + n):
                h = write(a[:, t] * h, t)
                out[:, t] = read(h, t)
            later = torch.zeros_like(h)
            for t in range(start + n - 1, start - 1, -1):
                later = a[:, t] * later
                out[:, t] += read(later, t)
                later = write(later, t)
            start += n
        return self.wo(out.reshape(B, T, -1).to(x.dtype))

    def _synthetic_fill(self, name, t, generator):
        t.normal_(0.0, 0.5, generator=generator)


MIXER = GatedDelta
