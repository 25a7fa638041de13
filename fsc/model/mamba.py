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
from fsc.model import fla_scan
from fsc.model.cache import LayerCache
from fsc.model.chunked import Chunks, decay_matrix, scan
from fsc.model.conv import conv_sequence, conv_two_stream, init_conv, window_after
from fsc.model.layers import RMSNorm, noised_positions
from fsc.model.mixer import FixedState

CHUNK = 16  # tokens a chunk of the training form holds (whole blocks, at least one)


def init_decay_and_conv(leaf: str, p: torch.Tensor, gen: torch.Generator) -> bool:
    """Seed Mamba-2's decay and conv parameters: A in [1, 16], dt in [1e-3, 0.1] (stored as its
    inverse softplus), the conv as `init_conv` does; False when `leaf` names none of them."""
    if leaf == "A_log":
        p.copy_(torch.empty(p.shape, device=p.device).uniform_(1, 16, generator=gen).log_())
    elif leaf == "dt_bias":
        lo, hi = math.log(1e-3), math.log(0.1)
        dt = torch.empty(p.shape, device=p.device).uniform_(lo, hi, generator=gen).exp_()
        p.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse softplus
    else:
        return init_conv(leaf, p, gen)
    return True


def decay_factor(positions, start: int, power: float, device=None):
    """The factor on A of tokens at `positions` ((T,) or (B, T), or a `range`): 1 within
    `start`, (start / (p + 1)) ** power past it (`MambaCfg.decay_from`); None when every
    position of a range is within (nothing changes, bit for bit)."""
    if isinstance(positions, range):
        if positions.stop <= start:
            return None
        positions = torch.arange(positions.start, positions.stop, device=device)
    tokens = positions.to(torch.float32) + 1
    return torch.where(tokens > start, (start / tokens) ** power, 1.0)


class Mamba(FixedState):
    kind = "mamba"
    carries = True  # on torch (the chunked forms)
    backends = ("torch", "fla")  # its training forms on fla: fsc/model/fla_scan.py

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
        self.decay_scale = cfg.decay_scale
        self.decay_from, self.decay_power = cfg.decay_from, cfg.decay_power
        # the least decay rate a token has (mamba.max_half_life), or None
        self.min_rate = None if cfg.max_half_life is None else math.log(2) / cfg.max_half_life

    def _out(self, y, dtype):
        """out_proj of the gated y [B, T, d_inner], through the gated norm when there is one."""
        return self.out_proj((y if self.norm is None else self.norm(y)).to(dtype))

    def init_parameter(self, leaf, p, gen):
        if not init_decay_and_conv(leaf, p, gen):
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
        xbc = ops.causal_conv_block(xbc, conv, self.conv_weight, self.conv_bias, conv if commit else None)
        xs, Bm, Cm = xbc.split([self.d_inner, self.d_state, self.d_state], dim=-1)
        A = self._A() if self.decay_from is None else self._rates(cache.positions(G))
        if A.dim() > 1:  # per token: [B, G, H]
            A = A.expand(B, G, self.n_heads)
        if self.min_rate is not None:  # per token, so that dt·A is at most -min_rate
            A = torch.minimum(A, -self.min_rate / self._step_sizes(dt).clamp_min(1e-30))
        y = ops.mamba_block_scan(
            self._heads(xs), dt, self.dt_bias, A, Bm, Cm, self.D, self._heads(z),
            ssm, ssm if commit else None,
        )
        return self._out(y.reshape(B, G, self.d_inner), x.dtype)

    def forward_blockwise(self, x, block_lengths):
        """Whole-sequence conv, then the chunked SSD form (`_chunked`), or on fla a scalar-decay
        scan (`_fla_scan`)."""
        return self._blockwise(x, block_lengths, self._fla_scan if self.backend == "fla" else self._chunked)

    def forward_blockwise_loop(self, x, block_lengths):
        """The same, block by block with a carried state: the reference of the chunked form."""
        return self._blockwise(x, block_lengths, self._blocks_in_turn)

    def _blockwise(self, x, block_lengths, scan):
        z, xbc, dt = self._split(x)
        xs, Bm, Cm, dtf, la = self._inputs(conv_sequence(xbc, self.conv_weight, self.conv_bias), dt,
                                           range(x.shape[1]))
        return self._output(scan(xs, Bm, Cm, dtf, la, block_lengths), xs, z, x.dtype)

    def forward_blockwise_from(self, x, block_lengths, start, at=0):
        """`forward_blockwise` (the chunked form) after a prefix of `at` tokens that left
        `start`, and the state it ends in (see `Mixer.forward_blockwise_from`)."""
        z, xbc, dt = self._split(x)
        window = None if start is None else start["conv"]
        xs, Bm, Cm, dtf, la = self._inputs(conv_sequence(xbc, self.conv_weight, self.conv_bias,
                                                         window), dt, range(at, at + x.shape[1]))
        y, h = self._chunked(xs, Bm, Cm, dtf, la, block_lengths, h_init=self._ssm(start),
                             final=True)
        return self._output(y, xs, z, x.dtype), self._end(xbc, window, h)

    def forward_two_stream(self, x_clean, x_noised, blocks):
        """The clean stream's chunked form also gives the forward state each scored block starts
        from; each noised block is then its own chunk, starting from that state, its conv
        window the clean stream's W-1 tokens before it. On fla, the scans of both streams are
        `fla_scan.two_stream`'s."""
        if self.backend != "fla":
            return self.forward_two_stream_from(x_clean, x_noised, blocks, None)[:2]
        z, xbc, dt = self._split(x_clean)
        zn, xbcn, dtn = self._split(x_noised)
        conv, conv_n = conv_two_stream(xbc, xbcn, blocks, self.conv_weight, self.conv_bias)
        clean, noised = self._noised_inputs(conv, dt, conv_n, dtn, blocks)
        y, yn = fla_scan.two_stream(fla_scan.SCALAR_DECAY, (*self._fla_operands(*clean), None),
                                    (*self._fla_operands(*noised), None), blocks, 1.0)
        return (self._output(y, clean[0], z, x_clean.dtype),
                self._output(yn, noised[0], zn, x_noised.dtype))

    def forward_two_stream_from(self, x_clean, x_noised, blocks, start):
        """`forward_two_stream` (the chunked form) after a prefix that left `start`, and the
        state the clean stream ends in (see `Mixer.forward_two_stream_from`)."""
        T, K = x_clean.shape[1], blocks.shape[1]
        G = x_noised.shape[1] // K
        z, xbc, dt = self._split(x_clean)
        zn, xbcn, dtn = self._split(x_noised)
        window = None if start is None else start["conv"]
        conv, conv_n = conv_two_stream(xbc, xbcn, blocks, self.conv_weight, self.conv_bias, window)
        clean, noised = self._noised_inputs(conv, dt, conv_n, dtn, blocks)
        y, starts, h = self._chunked(*clean, [G] * (T // G), at=blocks, h_init=self._ssm(start),
                                     final=True)
        yn = self._chunked(*noised, [G] * K, starts=starts)
        return (self._output(y, clean[0], z, x_clean.dtype),
                self._output(yn, noised[0], zn, x_noised.dtype), self._end(xbc, window, h))

    @staticmethod
    def _ssm(start):
        """The scan's starting state (B, H, P, N) fp32 of a `start` (None: zeros)."""
        return None if start is None else start["ssm"].float()

    def _end(self, xbc, window, h):
        """The cache's tensors after the sequence whose conv inputs are xbc (B, T, C), read after
        `window`, and whose scan ended in h: the last W-1 inputs (B, C, W-1) and h, in the
        state dtype."""
        return {"conv": window_after(xbc, self.conv_weight, window).to(self.state_dtype),
                "ssm": h.to(self.state_dtype)}

    def _fla_operands(self, xs, Bm, Cm, dtf, la):
        """The scan's inputs as fla's scalar-decay operands q, k, v, g: C and B of every head,
        dt x, the log decay."""
        heads = (-1, -1, self.n_heads, -1)
        return Cm[:, :, None].expand(heads), Bm[:, :, None].expand(heads), xs * dtf[..., None], la

    def _fla_scan(self, xs, Bm, Cm, dtf, la, block_lengths):
        """y (B, T, H, P) on fla's chunk_simple_gla (fsc/model/fla_scan.py)."""
        return fla_scan.blockwise(fla_scan.SCALAR_DECAY, *self._fla_operands(xs, Bm, Cm, dtf, la),
                                  block_lengths, 1.0)

    def _inputs(self, xbc, dt, positions):
        """The scan's inputs of the conv'd xbc (B, T, C) and raw dt (B, T, H) of tokens at
        `positions` (see `_rates`): x (B, T, H, P), B and C (B, T, N), dt after softplus and
        log a_t = dt_t A_t (B, T, H), fp32, at most -min_rate when the memory is bounded."""
        xs, Bm, Cm = xbc.split([self.d_inner, self.d_state, self.d_state], dim=-1)
        dtf = self._step_sizes(dt)  # (B, T, H)
        la = dtf * self._rates(positions)
        return self._heads(xs), Bm, Cm, dtf, la if self.min_rate is None else la.clamp(max=-self.min_rate)

    def _step_sizes(self, dt):
        """dt after softplus with the heads' bias, fp32: the step sizes the scan multiplies the
        decay rates by (the op computes the same from the raw dt)."""
        return F.softplus(dt.float() + self.dt_bias.float())

    def _noised_inputs(self, conv, dt, conv_n, dtn, blocks):
        """`_inputs` of the clean stream (positions from 0) and of the noised one, whose k-th
        block stands at block blocks[b, k] of its row."""
        at = None if self.decay_from is None else noised_positions(blocks, conv_n.shape[1] // blocks.shape[1])
        return self._inputs(conv, dt, range(conv.shape[1])), self._inputs(conv_n, dtn, at)

    def _A(self):
        """The heads' decay rates A = -exp(A_log) (H,), fp32, times `mamba.decay_scale`."""
        A = -torch.exp(self.A_log.float())
        return A if self.decay_scale == 1.0 else A * self.decay_scale

    def _rates(self, positions):
        """The decay rates of tokens at `positions` ((T,) or (B, T), or a `range`): `_A()`
        (H,), or with `mamba.decay_from` past it, each token's (..., T, H)."""
        A = self._A()
        factor = None if self.decay_from is None else decay_factor(
            positions, self.decay_from, self.decay_power, A.device)
        return A if factor is None else factor[..., None] * A

    def _output(self, y, xs, z, dtype):
        """The scan's y (B, T, H, P) with the skip D x, gated by silu(z), through out_proj."""
        y = (y + self.D.float()[:, None] * xs) * F.silu(self._heads(z).float())
        return self._out(y.flatten(2), dtype)

    def _chunked(self, xs, Bm, Cm, dtf, la, block_lengths, starts=None, at=None, h_init=None,
                 final=False):
        """SSD in chunks of whole blocks. Inside a chunk one masked quadratic form holds the
        forward scan (s <= t), the in-block backward scan (s after t in t's block) and the
        diagonal once; the forward state is carried from chunk to chunk, from `h_init`
        (B, H, P, N; zeros by default).

        With `starts` (B, n_blocks, H, P, N) every block is a chunk of its own and starts from
        the state given (nothing is carried). With `at` (B, K), also the forward state each of
        those blocks starts from, (B, K, H, P, N); with `final`, last, the state at the end."""
        G = max(block_lengths)
        ch = Chunks(block_lengths, 1 if starts is not None else max(1, CHUNK // G), xs.device)
        dec = decay_matrix(ch.pack(la), ch)  # (B, n, H, t, s)
        x = ch.pack(xs * dtf[..., None]).transpose(2, 3).contiguous()  # (B, n, H, C, P): dt_s x_s
        Bc, Cc = ch.pack(Bm), ch.pack(Cm)  # (B, n, C, N)
        cb = (Cc @ Bc.transpose(-1, -2))[:, :, None]  # (B, n, 1, t, s)
        y = (dec * cb) @ x  # (B, n, H, t, P)
        into = torch.exp(ch.pack(la).cumsum(2)).transpose(2, 3)  # (B, n, H, C): from chunk start
        h0, end = (starts, None) if starts is not None else self._carry(x, Bc, dec, into, h_init)
        # C_t·h0 for every head: one product per chunk over the heads' rows, not C broadcast
        # (copied) to every head
        ch0 = torch.einsum("bnhpm,bncm->bnhcp", h0, Cc)  # (B, n, H, C, P)
        y = ch.unpack((y + ch0 * into[..., None]).transpose(2, 3))
        if at is None:
            return (y, end) if final else y
        # only the K blocks asked for are formed, not every block end
        rows, c, r = ch.before(at)
        row = dec.transpose(2, 3)[rows, c, r]  # (B, K, H, C): decays from each s to e
        xg, Bg = x[rows, c], Bc[rows, c]  # (B, K, H, C, P), (B, K, C, N)
        h = torch.einsum("bkhcp,bkcm->bkhpm", xg * row[..., None], Bg)  # (B, K, H, P, N)
        h = h + into.transpose(2, 3)[rows, c, r][..., None, None] * h0[rows, c]
        first = (at == 0)[..., None, None, None]  # a block at 0 starts from h_init
        h = h * ~first if h_init is None else torch.where(first, h_init[:, None], h)
        return (y, h, end) if final else (y, h)

    @staticmethod
    def _carry(x, Bc, dec, into, h_init=None):
        """(the forward state each chunk starts from (B, n, H, P, N), the state at the end
        (B, H, P, N)): what each chunk adds by its end, carried from chunk to chunk from
        `h_init` (zeros by default)."""
        local = torch.einsum("bnhcp,bncm->bnhpm", x * dec[..., -1, :, None], Bc)  # (B, n, H, P, N)
        h = scan(into[..., -1, None, None], local, h_init)  # (B, n + 1, H, P, N)
        return h[:, :-1], h[:, -1]

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

    def _blocks_in_turn(self, xs, Bm, Cm, dtf, la, block_lengths):
        """Block by block: each block's quadratic form, then the state carried to the next."""
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
