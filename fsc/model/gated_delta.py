"""Gated DeltaNet mixer: the delta rule with a scalar per-head decay; forward scan from the
cached state, backward scan inside the block from zero (see fsc/mixers/gated_delta.py). Its
options: grouped value heads, a short causal conv over q, k and v, a gated RMSNorm on the
output."""

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
from fsc.model.conv import conv_sequence, conv_two_stream, window_after
from fsc.model.layers import RMSNorm
from fsc.model.mamba import init_decay_and_conv
from fsc.model.mixer import FixedState

CHUNK = 16  # tokens a chunk of the training form holds (whole blocks, at least one)


def _chunk_gated_delta_rule(q, k, v, g, beta, scale, **varlen):
    o, _ = fla_scan.fla_ops().chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, **varlen)
    return o


def _carried_wy(q, k, g, beta, G):
    """r [B, K·G, H, Dk]: each token's query carried back to its block's start (see
    `fla_scan.Recurrence`). With the block's inclusive cumulative log decay c_t,
    e^{c_t} (I − β_1 k_1 k_1ᵀ) ⋯ (I − β_t k_t k_tᵀ) q_t = e^{c_t} (q_t − Σ_{u ≤ t} (k_u·q_t) z_u),
    the z_u solving z_u + β_u Σ_{s < u} (k_u·k_s) z_s = β_u k_u (the WY form)."""
    c = fla_scan.in_blocks(g, G).cumsum(2)
    qb, kb = (fla_scan.in_blocks(t, G).transpose(2, 3) for t in (q, k))  # (B, K, H, G, Dk)
    bb = fla_scan.in_blocks(beta, G).transpose(2, 3)[..., None]  # (B, K, H, G, 1)
    kkt = kb @ kb.transpose(-1, -2)
    z = torch.linalg.solve_triangular(bb * kkt, bb * kb, upper=False, unitriangular=True)
    r = qb - torch.tril(qb @ kb.transpose(-1, -2)) @ z
    return (r * torch.exp(c.transpose(2, 3))[..., None]).transpose(2, 3).flatten(1, 2)


# The training forms on fla: the delta rule with a scalar decay, its queries carried back
# through each block's writes in the WY form (fsc/model/fla_scan.py).
DELTA_RULE = fla_scan.Recurrence(_chunk_gated_delta_rule, carried=_carried_wy)


class GatedDelta(FixedState):
    kind = "gated_delta"
    carries = True  # on torch (the chunked forms)
    backends = ("torch", "fla")  # its training forms on fla: fsc/model/fla_scan.py

    def __init__(self, recipe, dtype, state_dtype):
        super().__init__(recipe.d_model, dtype, state_dtype)
        cfg = recipe.gated_delta
        self.n_heads, self.n_qk_heads, self.head_dim, self.d_conv, conv_dim = spec.dims(
            cfg, recipe.d_model)
        self.l2norm_eps = cfg.l2norm_eps
        d, h, hqk, hd = recipe.d_model, self.n_heads, self.n_qk_heads, self.head_dim
        self.wq = nn.Linear(d, hqk * hd, bias=False)
        self.wk = nn.Linear(d, hqk * hd, bias=False)
        self.wv = nn.Linear(d, h * hd, bias=False)
        self.wa = nn.Linear(d, h, bias=False)  # decay input, per head
        self.wb = nn.Linear(d, h, bias=False)  # write strength, per head
        self.A_log = nn.Parameter(torch.empty(h))
        self.dt_bias = nn.Parameter(torch.empty(h))
        self.wo = nn.Linear(h * hd, d, bias=False)
        if self.d_conv:  # over q | k | v, no bias
            self.conv_weight = nn.Parameter(torch.empty(conv_dim, self.d_conv))
        if cfg.gated_norm:
            self.wz = nn.Linear(d, h * hd, bias=False)  # the output gate's input
            self.norm = RMSNorm(hd, recipe.norm_eps)
        else:
            self.norm = None

    def init_parameter(self, leaf, p, gen):
        """Mamba-2's decay and conv."""
        if not init_decay_and_conv(leaf, p, gen):
            super().init_parameter(leaf, p, gen)

    def cache_shapes(self, batch, capacity):
        shapes = {"state": ((batch, self.n_heads, self.head_dim, self.head_dim), self.state_dtype)}
        if self.d_conv:
            shapes["conv"] = ((batch, self.conv_weight.shape[0], self.d_conv - 1), self.state_dtype)
        return shapes

    def _mixed(self, x):
        """q | k | v of x (B, T, d), the conv's input: (B, T, C)."""
        return torch.cat([self.wq(x), self.wk(x), self.wv(x)], -1)

    def _l2(self, t):
        """t (B, T, H, D) L2-normalised over D in fp32 (`l2norm_eps`), back in t's dtype."""
        tf = t.float()
        if self.l2norm_eps is None:
            return F.normalize(tf, dim=-1).to(t.dtype)
        return (tf * torch.rsqrt((tf * tf).sum(-1, keepdim=True) + self.l2norm_eps)).to(t.dtype)

    def _inputs(self, qkv, x):
        """q, k (L2-normalised, each query/key head repeated for the value heads it serves),
        v [B, T, H, D] in x's dtype; log decay g and write strength beta [B, T, H], fp32; from
        q | k | v (after the conv, when there is one) and x (B, T, d)."""
        B, T, _ = x.shape
        hqk, hd = self.n_qk_heads * self.head_dim, self.head_dim
        q, k, v = qkv.to(x.dtype).split([hqk, hqk, self.n_heads * hd], -1)
        q, k = (self._l2(t.reshape(B, T, self.n_qk_heads, hd)) for t in (q, k))
        if self.n_qk_heads != self.n_heads:
            group = self.n_heads // self.n_qk_heads
            q, k = q.repeat_interleave(group, 2), k.repeat_interleave(group, 2)
        g = -torch.exp(self.A_log.float()) * F.softplus(self.wa(x).float() + self.dt_bias.float())
        beta = torch.sigmoid(self.wb(x).float())
        return q, k, v.reshape(B, T, self.n_heads, hd), g, beta

    def _proj(self, x, window=None):
        """`_inputs` of whole sequences x (B, T, d), the conv (if any) running from `window`
        (zeros by default)."""
        qkv = self._mixed(x)
        if self.d_conv:
            qkv = conv_sequence(qkv, self.conv_weight, None, window)
        return self._inputs(qkv, x)

    def _out(self, o, x):
        """wo of the heads' outputs o (B, T, H, Dv) for the inputs x; with `gated_norm`, each
        head RMS-normalised and gated by silu(wz x) first."""
        if self.norm is not None:
            o = self.norm(o.float()) * F.silu(self.wz(x).float()).view(o.shape)
        return self.wo(o.flatten(2).to(x.dtype))

    def _block(self, x, cache: LayerCache, commit: bool):
        qkv = self._mixed(x)
        if self.d_conv:
            conv = cache.tensors["conv"]
            qkv = ops.causal_conv_block(qkv, conv, self.conv_weight, None,
                           conv if commit else None)
        q, k, v, g, beta = self._inputs(qkv, x)
        st = cache.tensors["state"]
        o = ops.gated_delta_block(q, k, v, g, beta, st, 1 / math.sqrt(self.head_dim),
                     st if commit else None)
        return self._out(o, x)

    def forward_blockwise(self, x, block_lengths):
        """The chunked (WY) form of the delta rule, in chunks of whole blocks.

        Inside a chunk, with D the pairwise decays (`decay_matrix`) and A = diag(beta)(K Kᵀ ⊙ D):
        the forward scan's writes u (v_t less what the state recalled at k_t) solve the lower
        unit-triangular system (I + tril(A, -1)) u = beta v − beta exp(cum) (K h), h the state
        the chunk starts from; the backward scan's writes u' solve the upper one
        (I + triu(A, 1)) u' = beta v (D is zero across blocks, so each block is its own system,
        from zero). Reads: o = exp(cum) Q h + tril(Q Kᵀ ⊙ D) u + triu(Q Kᵀ ⊙ D, 1) u'. Across
        chunks h ← exp(cum_C) h + Kᵀ(D_C ⊙ u), an affine map of h built before the loop. On
        fla: chunk_gated_delta_rule (`DELTA_RULE`)."""
        q, k, v, g, beta = self._proj(x)
        if self.backend == "fla":
            o = fla_scan.blockwise(DELTA_RULE, q, k, v, g, block_lengths, 1 / math.sqrt(self.head_dim), beta)
        else:
            o = self._chunked(q, k, v, g, beta, block_lengths)
        return self._out(o, x)

    def forward_blockwise_from(self, x, block_lengths, start, at=0):
        """`forward_blockwise` (the chunked form) after a prefix that left `start`, and the
        state it ends in (see `Mixer.forward_blockwise_from`)."""
        window = self._window(start)
        o, h = self._chunked(*self._proj(x, window), block_lengths, h_init=self._state(start),
                             final=True)
        return self._out(o, x), self._end(x, window, h)

    def forward_two_stream(self, x_clean, x_noised, blocks):
        """The clean stream's chunked form also gives the state each scored block starts from;
        each noised block is then a chunk of its own, starting from that state, its
        conv window the clean stream's W-1 inputs before it. On fla, the scans of both streams
        are `fla_scan.two_stream`'s."""
        if self.backend != "fla":
            return self.forward_two_stream_from(x_clean, x_noised, blocks, None)[:2]
        inputs, inputs_n = self._streams(x_clean, x_noised, blocks)
        o, on = fla_scan.two_stream(DELTA_RULE, inputs, inputs_n, blocks, 1 / math.sqrt(self.head_dim))
        return self._out(o, x_clean), self._out(on, x_noised)

    def forward_two_stream_from(self, x_clean, x_noised, blocks, start):
        """`forward_two_stream` (the chunked form) after a prefix that left `start`, and the
        state the clean stream ends in (see `Mixer.forward_two_stream_from`)."""
        T, K = x_clean.shape[1], blocks.shape[1]
        G = x_noised.shape[1] // K
        window = self._window(start)
        inputs, inputs_n = self._streams(x_clean, x_noised, blocks, window)
        o, h, end = self._chunked(*inputs, [G] * (T // G), at=blocks, h_init=self._state(start),
                                  final=True)  # h: (B, K, H, Dk, Dv)
        on = self._chunked(*inputs_n, [G] * K, starts=h)
        return self._out(o, x_clean), self._out(on, x_noised), self._end(x_clean, window, end)

    def _streams(self, x_clean, x_noised, blocks, window=None):
        """`_inputs` of both streams, the clean one's conv (if any) running from `window`
        (zeros by default), each noised block's from the clean inputs before its block."""
        if not self.d_conv:
            return self._proj(x_clean), self._proj(x_noised)
        mixed, mixed_n = conv_two_stream(self._mixed(x_clean), self._mixed(x_noised), blocks,
                                         self.conv_weight, None, window)
        return self._inputs(mixed, x_clean), self._inputs(mixed_n, x_noised)

    def _window(self, start):
        """The conv window (B, C, W-1) of a `start` (None: zeros, or no conv)."""
        return None if start is None or not self.d_conv else start["conv"]

    @staticmethod
    def _state(start):
        """The forward state (B, H, Dk, Dv) fp32 of a `start` (None: zeros)."""
        return None if start is None else start["state"].float()

    def _end(self, x, window, h):
        """The cache's tensors after the sequence x (B, T, d), read after `window`, whose scan
        ended in h: h and, with a conv, the last W-1 conv inputs, in the state dtype."""
        end = {"state": h.to(self.state_dtype)}
        if self.d_conv:
            tail = x[:, max(0, x.shape[1] - (self.d_conv - 1)):]  # the inputs the window keeps
            conv = window_after(self._mixed(tail), self.conv_weight, window)
            end["conv"] = conv.to(self.state_dtype)
        return end

    def _chunked(self, q, k, v, g, beta, block_lengths, starts=None, at=None, h_init=None,
                 final=False):
        """o (B, T, H, Dv) of the chunked form, the state carried from chunk to chunk from
        `h_init` (B, H, Dk, Dv; zeros by default). With `starts` (B, n_blocks, H, Dk, Dv) every
        block is a chunk of its own and starts from the state given (nothing carried); with
        `at` (B, K), indices of blocks of G tokens each, also the state each of those blocks
        starts from, (B, K, H, Dk, Dv); with `final`, last, the state at the end."""
        G = max(block_lengths)
        ch = Chunks(block_lengths, 1 if starts is not None else max(1, CHUNK // G), q.device)
        dec = decay_matrix(ch.pack(g), ch)  # (B, n, H, t, s)

        def heads(t):  # (B, T, H, ...) -> (B, n, H, C, ...)
            return ch.pack(t).transpose(2, 3).contiguous()

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
            h = torch.zeros_like(N[:, 0]) if h_init is None else h_init  # (B, H, Dk, Dv)
            carried = []
            for M_c, N_c in zip(M.unbind(1), N.unbind(1)):
                carried.append(h)
                h = M_c @ h + N_c
            starts = torch.stack(carried, 1)  # (B, n, H, Dk, Dv): the state each chunk starts from
        o = ch.unpack((o + read @ starts).transpose(2, 3))  # (B, T, H, Dv)
        if at is None:
            return (o, h) if final else o
        # the state at the last token e before a block is exp(cum_e) h0 + Σ_s k_s D(e, s) u_s,
        # with the forward writes u = u0 − w h0; only the K blocks asked for are formed
        rows, c, r = ch.before(at)
        row = dec.transpose(2, 3)[rows, c, r]  # (B, K, H, C): decays from each s to e
        u = (u0 - w @ starts)[rows, c]  # (B, K, H, C, Dv)
        hb = (k[rows, c] * row[..., None]).transpose(-1, -2) @ u  # (B, K, H, Dk, Dv)
        hb = hb + into[..., 0].transpose(2, 3)[rows, c, r][..., None, None] * starts[rows, c]
        first = (at == 0)[..., None, None, None]  # a block at 0 starts from h_init
        hb = hb * ~first if h_init is None else torch.where(first, h_init[:, None], hb)
        return (o, hb, h) if final else (o, hb)

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
        return self._out(out, x)
