"""Norms, feed-forward blocks and RoPE shared by every stack."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DTYPE_NAMES = {v: k for k, v in TORCH_DTYPES.items()}


def init_parameter(leaf: str, p: torch.Tensor, gen: torch.Generator) -> None:
    """Seeded initial value of a parameter named `leaf`: norms' weights (1-D) and D are 1,
    biases 0, matrices normal(0, 0.02). Mixers with parameters of their own override
    `Mixer.init_parameter` and fall back on this."""
    if (leaf == "weight" and p.ndim == 1) or leaf == "D":
        p.fill_(1.0)
    elif leaf == "bias":
        p.zero_()
    else:
        p.normal_(0.0, 0.02, generator=gen)


class RMSNorm(nn.Module):
    """y = x / sqrt(mean(x²) + eps) · w in fp32; with `offset` (zero-centred) the weight is
    stored as its offset from 1: y · (1 + w)."""

    def __init__(self, dim: int, eps: float, offset: bool = False):
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        w = self.weight.float()
        return (y * (1.0 + w if self.offset else w)).to(x.dtype)


class MLP(nn.Module):
    """GELU MLP, hidden = hidden_ratio × d_model."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class SwiGLU(nn.Module):
    """SwiGLU MLP (Llama's): down(silu(gate x) · up x)."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


DENSE_TOKENS = 512  # off the CPU, passes of at most this many tokens run every expert densely


class MoE(nn.Module):
    """Top-k mixture of GELU (up, down) or SwiGLU (gate, up, down) experts; gate weights are the
    softmax over the chosen k. With `shared_hidden`, a shared expert of that width (the same
    kind) runs on every token, scaled by sigmoid(shared_gate x) when `shared_gate`.

    The (token, choice) pairs are sorted by expert and each projection is one grouped matmul
    (`F.grouped_mm`, jagged groups, no padding) on the CPU. On other devices a decode-sized
    pass (at most DENSE_TOKENS tokens) runs every expert on every token (`forward_dense`: fixed
    shapes, so CUDA graphs hold it); longer passes there, and widths that are not a multiple
    of 16 bytes (grouped_mm's layout rule), run the experts one after another (`forward_loop`,
    also the reference both other forms are tested against)."""

    def __init__(self, d_model: int, hidden: int, n_experts: int, top_k: int,
                 swiglu: bool = False, shared_hidden: int | None = None,
                 shared_gate: bool = False):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(d_model, n_experts, bias=False)
        self.up = nn.Parameter(torch.empty(n_experts, d_model, hidden))
        self.down = nn.Parameter(torch.empty(n_experts, hidden, d_model))
        self.gate = nn.Parameter(torch.empty(n_experts, d_model, hidden)) if swiglu else None
        self.shared = (None if shared_hidden is None
                       else (SwiGLU if swiglu else MLP)(d_model, shared_hidden))
        self.shared_gate = nn.Linear(d_model, 1, bias=False) if shared_gate else None

    def _route(self, flat):
        """The chosen experts (N, k) and their gate weights (N, k) of each token."""
        top, idx = self.router(flat).float().topk(self.top_k, dim=-1)
        return idx, torch.softmax(top, dim=-1).to(flat.dtype)

    def _hidden(self, x, mm):
        """The experts' activations of rows x: act(mm(x, up)), or silu(mm(x, gate)) · mm(x, up)
        (SwiGLU); `mm(x, w)` multiplies each row by its own expert's slice of w."""
        if self.gate is None:
            return F.gelu(mm(x, self.up))
        return F.silu(mm(x, self.gate)) * mm(x, self.up)

    def _with_shared(self, flat, y):
        """y [N, d] plus the shared expert's output, when there is one."""
        if self.shared is None:
            return y
        s = self.shared(flat)
        return y + (s if self.shared_gate is None else torch.sigmoid(self.shared_gate(flat)) * s)

    def _grouped_fits(self, x) -> bool:
        align = 16 // x.element_size()
        _, d, hidden = self.up.shape
        return (x.device.type == "cpu" and x.dtype in (torch.float32, torch.bfloat16, torch.float16)
                and d % align == 0 and hidden % align == 0)

    def forward(self, x):  # (B, T, d)
        if x.device.type != "cpu" and x.shape[0] * x.shape[1] <= DENSE_TOKENS:
            return self.forward_dense(x)
        if not self._grouped_fits(x):
            return self.forward_loop(x)
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        idx, gates = self._route(flat)  # (N, k)
        N, k = idx.shape
        expert = idx.flatten()  # the expert of each (token, choice)
        order = expert.argsort(stable=True)  # the pairs grouped by expert
        ends = torch.bincount(expert, minlength=self.up.shape[0]).cumsum(0).to(torch.int32)
        h = self._hidden(flat[order // k], lambda t, w: F.grouped_mm(t, w, offs=ends))
        y = F.grouped_mm(h, self.down, offs=ends)[order.argsort()]  # back in (token, choice) order
        y = (y.view(N, k, -1) * gates[..., None]).sum(1)
        return self._with_shared(flat, y).reshape(shape)

    def forward_dense(self, x):  # (B, T, d)
        """Every expert on every token, each output weighted by its gate (0 where not chosen):
        fixed shapes, no data-dependent indexing, so a CUDA graph can hold it (decode's steps,
        at most DENSE_TOKENS tokens a pass, where reading every expert's weights is the cost
        either way)."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        idx, gates = self._route(flat)
        weight = torch.zeros(flat.shape[0], self.up.shape[0], dtype=flat.dtype, device=x.device)
        weight.scatter_(1, idx, gates)  # (N, E): the gate of each chosen expert
        h = self._hidden(flat, lambda t, w: torch.einsum("nd,edh->neh", t, w))
        y = torch.einsum("neh,ehd,ne->nd", h, self.down, weight)
        return self._with_shared(flat, y).reshape(shape)

    def forward_loop(self, x):  # (B, T, d)
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        idx, gates = self._route(flat)
        out = torch.zeros_like(flat)
        for e in range(self.up.shape[0]):
            rows, slot = (idx == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            h = self._hidden(flat[rows], lambda t, w, e=e: t @ w[e]) @ self.down[e]
            out[rows] += h * gates[rows, slot, None]  # rows are distinct within one expert
        return self._with_shared(flat, out).reshape(shape)


def rope_frequencies(d: int, theta: float, scaling=None, device=None) -> torch.Tensor:
    """The D/2 rotary frequencies (fp32) of a head of size d, after a recipe's `rope_scaling`
    (fsc.mixers.attention.RopeScaling): linear divides all by the factor; llama3 divides those
    whose wavelength exceeds original_context / low_freq_factor, keeps those below
    original_context / high_freq_factor and blends linearly in between."""
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
    if scaling is None:
        return inv
    if scaling.kind == "linear":
        return inv / scaling.factor
    wavelen = 2 * math.pi / inv
    ctx, lo, hi = scaling.original_context, scaling.low_freq_factor, scaling.high_freq_factor
    scaled = torch.where(wavelen > ctx / lo, inv / scaling.factor, inv)
    smooth = (ctx / wavelen - lo) / (hi - lo)
    blended = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    medium = (wavelen >= ctx / hi) & (wavelen <= ctx / lo)
    return torch.where(medium, blended, scaled)


ROPE_TABLE_MAX = 1 << 15  # positions below this read cached cos/sin tables; beyond, computed per call
_rope_tables: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def _angles(d: int, positions, theta: float, scaling):
    inv = rope_frequencies(d, theta, scaling, positions.device)
    ang = positions.to(torch.float32)[..., None] * inv  # ([B,] T, D/2)
    return (torch.cat([ang.cos(), ang.cos()], dim=-1)[..., None, :],
            torch.cat([ang.sin(), ang.sin()], dim=-1)[..., None, :])


def _cos_sin(d: int, positions, theta: float, scaling, upto: int | None, device):
    """cos and sin ([B,] T, 1, d) of the rotary angles at `positions` (a tensor, or a `range`).
    With `upto` (every position is below it) and upto <= ROPE_TABLE_MAX they are read from a
    table shared by every head of that shape, built once per device for the positions below
    the next power of two: the same values, without the ~15 operations per call of computing
    them (a decode step asks for one position, in every layer); a `range` reads a slice."""
    if upto is None or upto > ROPE_TABLE_MAX:
        if isinstance(positions, range):
            positions = torch.arange(positions.start, positions.stop, device=device)
        return _angles(d, positions, theta, scaling)
    key = (d, theta, repr(scaling), str(device))
    cos, sin = _rope_tables.get(key, (None, None))
    if cos is None or cos.shape[0] < upto:
        n = max(256, 1 << (upto - 1).bit_length())
        with torch.inference_mode(False), torch.no_grad():  # plain tensors, whoever asks first
            cos, sin = _angles(d, torch.arange(n, device=device), theta, scaling)
        _rope_tables[key] = cos, sin
    if isinstance(positions, range):
        return cos[positions.start : positions.stop], sin[positions.start : positions.stop]
    return cos[positions], sin[positions]


def rope(x, positions, theta: float, scaling=None, dims: int | None = None, upto: int | None = None):
    """Rotate-half RoPE. x: (B, T, H, D); positions: (T,) or (B, T) absolute token positions. With
    `dims`, only the first `dims` of D rotate (partial RoPE); the rest pass through. `upto`, when
    the caller knows it, bounds the positions (all below it), and positions may then be a
    `range`: see `_cos_sin`."""
    if dims is not None and dims < x.shape[-1]:
        return torch.cat([rope(x[..., :dims], positions, theta, scaling, upto=upto), x[..., dims:]],
                         dim=-1)
    d = x.shape[-1]
    cos, sin = _cos_sin(d, positions, theta, scaling, upto, x.device)
    xf = x.float()
    x1, x2 = xf[..., : d // 2], xf[..., d // 2 :]
    rotated = torch.cat([-x2, x1], dim=-1)
    return (xf * cos + rotated * sin).to(x.dtype)


def noised_positions(blocks: torch.Tensor, G: int) -> torch.Tensor:
    """The positions (B, K·G) of the two-stream objective's K noised blocks of G, the k-th of
    row b standing at block blocks[b, k] (B, K): those of its clean twin."""
    return (blocks[..., None] * G + torch.arange(G, device=blocks.device)).flatten(1)


def block_ids(block_lengths: list[int], device) -> torch.Tensor:
    """Block index of every token of a sequence cut into blocks of the given lengths."""
    lengths = torch.tensor(block_lengths, device=device)
    return torch.repeat_interleave(torch.arange(len(block_lengths), device=device), lengths)
