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
from fsc.model.layers import RMSNorm
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
        # Mamba-2's gated RMSNorm: the op gates y by silu(z); the norm follows.
        self.norm = RMSNorm(self.d_inner, recipe.norm_eps) if cfg.gated_norm else None

    def _out(self, y, dtype):
        """out_proj of the gated y [B, T, d_inner], through the gated norm when there is one."""
        return self.out_proj((y if self.norm is None else self.norm(y)).to(dtype))

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
        return self._out(y.reshape(B, G, self.d_inner), x.dtype)

    def forward_blockwise(self, x, block_lengths):
        """Whole-sequence conv, then per block the SSD quadratic form plus the carried state
        (all blocks at once when they are of one length, as in training)."""
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
        uniform = len(set(block_lengths)) == 1
        scan = self._blocks_at_once if uniform else self._blocks_in_turn
        y = scan(xs, Bm, Cm, dtf, la, block_lengths) + self.D.float()[:, None] * xs
        y = y * F.silu(self._heads(z).float())
        return self._out(y.reshape(Bsz, T, self.d_inner), x.dtype)

    @staticmethod
    def _segments(lab, g: int):
        """exp of the summed log decay between positions of a block (..., g) of log a:
        forward over (s, t] for s <= t, backward over [t, s) for s > t; (..., t, s, H)."""
        idx = torch.arange(g, device=lab.device)
        u, si = idx[:, None], idx[None, :]
        lower = (si <= u)[:, :, None]
        # Each segment summed on its own (a scan over the summed token u on the t axis), not
        # as a difference of cum, which cancels to an ulp of cum (see kernels/mamba/triton.py).
        la_u = lab.unsqueeze(-2)  # (..., u, 1, H)
        seg_f = torch.where((u > si)[:, :, None], la_u, 0.0).cumsum(-3)  # (..., t, s, H)
        seg_b = torch.where((u < si)[:, :, None], la_u, 0.0).flip(-3).cumsum(-3).flip(-3)
        fwd = torch.exp(seg_f.masked_fill(~lower, float("-inf")))
        bwd = torch.exp(seg_b.masked_fill(lower, float("-inf")))
        return fwd, bwd, seg_f

    def _blocks_at_once(self, xs, Bm, Cm, dtf, la, block_lengths):
        """Every block's quadratic form in one batch of einsums; then the carried state,
        block to block, and its part of each output."""
        Bsz, T, H, P = xs.shape
        g, n = block_lengths[0], len(block_lengths)
        xb, dtb, lab = (t.reshape(Bsz, n, g, *t.shape[2:]) for t in (xs, dtf, la))
        Bb, Cb = Bm.reshape(Bsz, n, g, -1), Cm.reshape(Bsz, n, g, -1)
        cum = lab.cumsum(2)  # (B, n, g, H)
        fwd, bwd, seg_f = self._segments(lab, g)  # (B, n, t, s, H)
        cb = torch.einsum("bctn,bcsn->bcts", Cb, Bb)[..., None]
        mix = (fwd + bwd) * cb * dtb[:, :, None, :, :]
        y = torch.einsum("bctsh,bcshp->bcthp", mix, xb)
        tail = torch.exp(seg_f[:, :, -1])  # (B, n, s, H): decay from s to the block end
        local = torch.einsum("bcsh,bcshp,bcsn->bchpn", tail * dtb, xb, Bb)
        decay = torch.exp(cum[:, :, -1])  # (B, n, H)
        h = torch.zeros(Bsz, H, P, Bb.shape[-1], device=xs.device)
        carried = []
        # unbind, not local[:, c]: indexing would back-propagate a full-size zero tensor per block
        for dec, add in zip(decay.unbind(1), local.unbind(1)):  # the state each block starts from
            carried.append(h)
            h = h * dec[:, :, None, None] + add
        h0 = torch.stack(carried, 1)  # (B, n, H, P, N)
        y = y + torch.einsum("bchpn,bctn->bcthp", h0, Cb) * torch.exp(cum)[..., None]
        return y.reshape(Bsz, T, H, P)

    def _blocks_in_turn(self, xs, Bm, Cm, dtf, la, block_lengths):
        """Blocks of unequal lengths (a prompt's partial last block), one after another."""
        h = torch.zeros(xs.shape[0], self.n_heads, self.head_dim, self.d_state, device=xs.device)
        ys, start = [], 0
        for g in block_lengths:
            sl = slice(start, start + g)
            start += g
            xb, Bb, Cb, dtb, lab = xs[:, sl], Bm[:, sl], Cm[:, sl], dtf[:, sl], la[:, sl]
            cum = lab.cumsum(1)  # (B, g, H)
            fwd, bwd, seg_f = self._segments(lab, g)  # (B, t, s, H)
            cb = torch.einsum("btn,bsn->bts", Cb, Bb)[..., None]  # (B, t, s, 1)
            mix = (fwd + bwd) * cb * dtb[:, None, :, :]  # (B, t, s, H)
            y = torch.einsum("btsh,bshp->bthp", mix, xb)
            y = y + torch.einsum("bhpn,btn->bthp", h, Cb) * torch.exp(cum)[..., None]
            ys.append(y)
            tail = torch.exp(seg_f[:, -1])  # (B, g, H): decay from s to the block end
            h = h * torch.exp(cum[:, -1])[..., None, None] + torch.einsum(
                "bsh,bshp,bsn->bhpn", tail * dtb, xb, Bb
            )
        return torch.cat(ys, dim=1)

    def _synthetic_fill(self, name, t, generator):
        t.normal_(0.0, 0.5 if name == "ssm" else 1.0, generator=generator)


MIXER = Mamba
