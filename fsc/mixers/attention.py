"""Attention (MHA/GQA, RoPE or no position encoding): the one mixer whose cache grows with the
context."""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import Field, model_validator

from fsc.mixers.spec import MixerShape, MixerSpec
from fsc.sections import ADDED, MAX_HEAD_DIM, MAX_HEADS, Bad, Section

LLAMA3_BANDS = ("low_freq_factor", "high_freq_factor", "original_context")  # llama3's own


class RopeScaling(Section):
    """The RoPE scalings that change only the rotary frequencies (so fsc reproduces them
    exactly): `linear` divides every frequency by `factor`; `llama3` divides the low ones by
    `factor`, keeps the high ones and blends those between (Llama 3.1's rule)."""

    kind: Literal["linear", "llama3"]
    factor: float = Field(ge=1.0, le=1024.0, allow_inf_nan=False)
    low_freq_factor: float = Field(1.0, gt=0, le=1024.0, allow_inf_nan=False)
    high_freq_factor: float = Field(4.0, gt=0, le=1024.0, allow_inf_nan=False)
    original_context: int = Field(8192, ge=1, le=2**24)

    def hashed_fields(self) -> dict:
        out = super().hashed_fields()
        if self.kind == "linear":  # llama3's bands: not in use
            for name in LLAMA3_BANDS:
                del out[name]
        return out

    @model_validator(mode="after")
    def _bands(self):
        bands = [n for n in LLAMA3_BANDS if n in self.model_fields_set]
        if self.kind == "linear" and bands:  # would be ignored (and left out of the hash)
            raise Bad((bands[0],), "is llama3's; linear divides every frequency by factor alone",
                      getattr(self, bands[0]), f"kind: llama3, or drop {', '.join(bands)}")
        if self.kind == "llama3" and self.high_freq_factor <= self.low_freq_factor:
            raise Bad(("high_freq_factor",), "must exceed low_freq_factor "
                      f"{self.low_freq_factor:g}", self.high_freq_factor,
                      "high_freq_factor > low_freq_factor")
        return self


ROPE_THETA = 10000.0  # RoPE's base where a recipe names none (the Transformer's, Llama's)


class AttentionCfg(Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    n_kv_heads: int | None = Field(None, ge=1, le=MAX_HEADS)
    head_dim: int | None = Field(None, ge=1, le=MAX_HEAD_DIM)
    # Below 1 the rotary frequencies would rise with the dimension instead of falling.
    rope_theta: float = Field(ROPE_THETA, ge=1.0, le=1e12, allow_inf_nan=False)
    # rope: rotary encoding of absolute positions on q and k. none (NoPE): no position encoding
    # at all; order reaches attention only through the causal mask and, in a hybrid, through the
    # recurrent layers, which is what lets it read past its training length.
    position: Literal["rope", "none"] = Field("rope", json_schema_extra=ADDED)
    rope_scaling: RopeScaling | None = Field(None, json_schema_extra=ADDED)
    # Partial RoPE: only the first rope_dims dimensions of each head rotate (their frequencies
    # spread over rope_dims); the rest pass through. None: the whole head (Bamba: half).
    rope_dims: int | None = Field(None, ge=2, le=MAX_HEAD_DIM, json_schema_extra=ADDED)
    # Biases on the projections: none, q/k/v (Qwen2), or q/k/v and the output (Llama's
    # attention_bias).
    bias: Literal["none", "qkv", "qkvo"] = Field("none", json_schema_extra=ADDED)
    # RMSNorm (eps: the recipe's norm_eps) over each head of q and of k, before RoPE (Qwen3).
    qk_norm: bool = Field(False, json_schema_extra=ADDED)
    # Gated attention (Qwen3-Next): the heads' output o is multiplied by sigmoid(wg x), one gate
    # per element, before wo; wg has a bias when q has one.
    output_gate: bool = Field(False, json_schema_extra=ADDED)
    # Sliding window: each block reads its own tokens and the `window` tokens before its start,
    # no further back (None: the whole prefix). The cache is then a ring of `window` slots, a
    # fixed state like a recurrent mixer's, and nothing the layer computes depends on how far
    # back the context goes: a hybrid whose attention is local has to carry anything older in
    # its recurrent layers (Samba's design), which is what lets it read past its training length.
    window: int | None = Field(None, ge=1, le=2**24, json_schema_extra=ADDED)
    # Log-length query scaling (Qwen's logn attention; Scalable-Softmax): a query at position p
    # with p + 1 > logn is multiplied by log(p + 1) / log(logn), so the softmax over a context
    # longer than `logn` (the training length) stays as peaked as at that length instead of
    # spreading its weight over the added keys. None: no scaling. Changes no weight: a
    # checkpoint trained without it can be scored with it (`fsc eval --set attention.logn=L`).
    logn: int | None = Field(None, ge=2, le=2**24, json_schema_extra=ADDED)


class Dims(NamedTuple):
    n_heads: int
    n_kv_heads: int
    head_dim: int


def dims(cfg: AttentionCfg, d_model: int) -> Dims:
    return Dims(cfg.n_heads, cfg.n_kv_heads or cfg.n_heads, cfg.head_dim or d_model // cfg.n_heads)


def _check(a: AttentionCfg, d: int) -> None:
    kv = a.n_kv_heads or a.n_heads
    if a.n_heads % kv:
        raise Bad(("attention", "n_heads"), f"not a multiple of n_kv_heads {kv}", a.n_heads,
                  "a multiple of n_kv_heads")
    if a.head_dim is None and d % a.n_heads:
        raise Bad(("attention", "n_heads"), f"does not divide d_model {d}", a.n_heads,
                  "a divisor of d_model, or an explicit head_dim")
    head_dim = a.head_dim or d // a.n_heads
    if a.rope_theta != ROPE_THETA and a.position != "rope":  # it would change the hash alone
        raise Bad(("attention", "rope_theta"), "given without RoPE", a.rope_theta,
                  f"no rope_theta (or its default {ROPE_THETA:g}) with position none")
    if a.rope_scaling is not None and a.position != "rope":
        raise Bad(("attention", "rope_scaling"), "given without RoPE", a.rope_scaling.kind,
                  "no rope_scaling with position none")
    if a.rope_dims is not None and a.position != "rope":
        raise Bad(("attention", "rope_dims"), f"given with position {a.position}, which "
                  "rotates nothing", a.rope_dims, "no rope_dims without position rope")
    if a.rope_dims is not None and (a.rope_dims % 2 or a.rope_dims > head_dim):
        raise Bad(("attention", "rope_dims"), f"must be even and at most head_dim {head_dim}",
                  a.rope_dims, f"an even number from 2 to {head_dim}")
    if head_dim % 2 and a.position == "rope" and a.rope_dims is None:  # RoPE rotates pairs
        field = "head_dim" if a.head_dim else "n_heads"
        raise Bad(("attention", field), f"makes head_dim {head_dim} odd; RoPE rotates pairs of "
                  "dimensions", getattr(a, field), "an even head_dim")


def _at_width(cfg: dict, d_model: int, scale: float) -> dict:
    """Heads scaled with the width, keeping the query heads per KV head (and the rotated
    fraction of each head, with partial RoPE)."""
    old_head_dim = cfg.get("head_dim") or round(d_model / scale) // cfg["n_heads"]
    kv = cfg.get("n_kv_heads", cfg["n_heads"])
    group = cfg["n_heads"] // kv
    heads = max(1, round(cfg["n_heads"] * scale))
    kv = max(1, heads // group)
    heads = kv * group
    cfg["n_kv_heads"] = kv
    while d_model % heads:
        heads -= 1
    cfg["n_heads"] = heads
    cfg.pop("head_dim", None)
    if "rope_dims" in cfg:
        fraction = cfg["rope_dims"] / old_head_dim
        cfg["rope_dims"] = max(2, 2 * round(fraction * (d_model // heads) / 2))
    return cfg


def _shape(recipe) -> MixerShape:
    d = recipe.d_model
    h, hkv, hd = dims(recipe.attention, d)
    a = recipe.attention
    # k, v: [B, capacity, Hkv, D]; windowed, a ring [B, window, Hkv, D] in the recipe's dtype
    kv = (hkv * hd, 0) if a.window is None else (0, a.window * hkv * hd)
    extra = {"none": 0, "qkv": (h + 2 * hkv) * hd, "qkvo": (h + 2 * hkv) * hd + d}[a.bias]
    extra += 2 * hd if a.qk_norm else 0
    extra += h * hd if a.output_gate and a.bias != "none" else 0
    linears = ((d, h * hd), (d, hkv * hd), (d, hkv * hd), (h * hd, d))
    linears += ((d, h * hd),) if a.output_gate else ()  # wg
    return MixerShape("attention", linears, extra, {"k": kv, "v": kv},
                      attn_flops_per_pair=4 * h * hd, window=a.window,
                      cache_dtype=None if a.window is None else recipe.dtype)


SPEC = MixerSpec(kind="attention", letter="A", order=0, section=AttentionCfg, shape=_shape,
                 ops=("block_attention",), tag="attention", check=_check, at_width=_at_width)
