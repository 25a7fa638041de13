"""Bidirectional Mamba-2 mixer (per-head scalar decay, one B/C group).

Forward direction: causal conv with a cached window, then a scan carried across blocks in the
cache. Backward direction: the same recurrence over the current block reversed, from zero.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fsc import ops
from fsc.mixers import mamba as spec
from fsc.model.cache import LayerCache
from fsc.model.mixer import Mixer


class Mamba(Mixer):
    kind = "mamba"

    def __init__(self, recipe, dtype, state_dtype):
        super().__init__(recipe.d_model, dtype, state_dtype)
        cfg = recipe.mamba
        (self.d_inner, self.n_heads, self.head_dim, self.d_state, self.d_conv,
         self.conv_dim) = spec.dims(cfg, recipe.d_model)
        # in_proj -> z (d_inner) | x, B, C (conv_dim) | dt (n_heads)
        self.in_proj = nn.Linear(recipe.d_model, self.d_inner + self.conv_dim + self.n_heads, bias=False)
        self.conv_weight = nn.Parameter(torch.empty(self.conv_dim, cfg.d_conv))
        self.conv_bias = nn.Parameter(torch.empty(self.conv_dim))
        self.A_log = nn.Parameter(torch.empty(self.n_heads))
        self.dt_bias = nn.Parameter(torch.empty(self.n_heads))
        self.D = nn.Parameter(torch.empty(self.n_heads))
        self.out_proj = nn.Linear(self.d_inner, recipe.d_model, bias=False)

    def init_parameter(self, leaf, p, gen):
        """Mamba-2 style: A in [1, 16], dt in [1e-3, 0.1] (stored as its inverse softplus), the
        conv uniform within 1/sqrt(width), its bias within 0.1."""
        if leaf == "A_log":
            p.copy_(torch.empty(p.shape, device=p.device).uniform_(1, 16, generator=gen).log_())
        elif leaf == "dt_bias":
            lo, hi = math.log(1e-3), math.log(0.1)
            dt = torch.empty(p.shape, device=p.device).uniform_(lo, hi, generator=gen).exp_()
            p.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
        elif leaf == "conv_weight":
            bound = 1 / math.sqrt(p.shape[-1])
            p.uniform_(-bound, bound, generator=gen)
        elif leaf == "conv_bias":
            p.uniform_(-0.1, 0.1, generator=gen)
        else:
            super().init_parameter(leaf, p, gen)

    def cache_shapes(self, batch, capacity):
        return {
            "conv": ((batch, self.conv_dim, self.d_conv - 1), self.state_dtype),
            "ssm": ((batch, self.n_heads, self.head_dim, self.d_state), self.state_dtype),
        }

    def _split(self, x):
        zxbcdt = self.in_proj(x)
        z, xbc, dt = zxbcdt.split([self.d_inner, self.conv_dim, self.n_heads], dim=-1)
        return z, xbc, dt

    def _heads(self, t):
        return t.reshape(*t.shape[:2], self.n_heads, self.head_dim)

    def _block(self, x, cache: LayerCache, commit: bool):
        B, G, _ = x.shape
        z, xbc, dt = self._split(x)
        conv, ssm = cache.tensors["conv"], cache.tensors["ssm"]
        xbc = ops.call("causal_conv_block", xbc, conv, self.conv_weight, self.conv_bias, conv if commit else None)
        xs, Bm, Cm = xbc.split([self.d_inner, self.d_state, self.d_state], dim=-1)
        A = -torch.exp(self.A_log.float())
        y = ops.call(
            "mamba_block_scan",
            self._heads(xs), dt, self.dt_bias, A, Bm, Cm, self.D, self._heads(z),
            ssm, ssm if commit else None,
        )
        return self.out_proj(y.reshape(B, G, self.d_inner).to(x.dtype))

    def forward_blockwise(self, x, block_lengths):
        """Whole-sequence conv, then per block the SSD quadratic form plus the carried state."""
        Bsz, T, _ = x.shape
        z, xbc, dt = self._split(x)
        w = self.conv_weight.float().unsqueeze(1)
        xbc = F.conv1d(F.pad(xbc.float().transpose(1, 2), (self.d_conv - 1, 0)), w,
                       self.conv_bias.float(), groups=self.conv_dim)
        xbc = F.silu(xbc).transpose(1, 2)
        xs, Bm, Cm = xbc.split([self.d_inner, self.d_state, self.d_state], dim=-1)
        xs = self._heads(xs)
        dtf = F.softplus(dt.float() + self.dt_bias.float())  # (B, T, H)
        la = dtf * -torch.exp(self.A_log.float())  # log a_t
        h = torch.zeros(Bsz, self.n_heads, self.head_dim, self.d_state, device=x.device)
        ys, start = [], 0
        for g in block_lengths:
            sl = slice(start, start + g)
            start += g
            xb, Bb, Cb, dtb, lab = xs[:, sl], Bm[:, sl], Cm[:, sl], dtf[:, sl], la[:, sl]
            cum = lab.cumsum(1)  # (B, g, H)
            idx = torch.arange(g, device=x.device)
            u, si = idx[:, None], idx[None, :]
            lower = (si <= u)[None, :, :, None]
            # forward: sum of log a over (s, t] for s <= t; backward: over [t, s) for s > t.
            # Each segment summed on its own (a scan over the summed token u on dim 1), not as a
            # difference of cum, which cancels to an ulp of cum (see kernels/mamba/triton.py).
            la_u = lab[:, :, None, :]
            seg_f = torch.where((u > si)[None, :, :, None], la_u, 0.0).cumsum(1)  # (B, t, s, H)
            seg_b = torch.where((u < si)[None, :, :, None], la_u, 0.0).flip(1).cumsum(1).flip(1)
            fwd = torch.exp(seg_f.masked_fill(~lower, float("-inf")))
            bwd = torch.exp(seg_b.masked_fill(lower, float("-inf")))
            cb = torch.einsum("btn,bsn->bts", Cb, Bb)[..., None]  # (B, t, s, 1)
            mix = (fwd + bwd) * cb * dtb[:, None, :, :]  # (B, t, s, H)
            y = torch.einsum("btsh,bshp->bthp", mix, xb)
            y = y + torch.einsum("bhpn,btn->bthp", h, Cb) * torch.exp(cum)[..., None]
            ys.append(y)
            tail = torch.exp(seg_f[:, -1])  # (B, g, H): decay from s to the block end
            h = h * torch.exp(cum[:, -1])[..., None, None] + torch.einsum(
                "bsh,bshp,bsn->bhpn", tail * dtb, xb, Bb
            )
        y = torch.cat(ys, dim=1) + self.D.float()[:, None] * xs
        y = y * F.silu(self._heads(z).float())
        return self.out_proj(y.reshape(Bsz, T, self.d_inner).to(x.dtype))

    def _synthetic_fill(self, name, t, generator):
        t.normal_(0.0, 0.5 if name == "ssm" else 1.0, generator=generator)


MIXER = Mamba
