"""Attention (MHA/GQA, RoPE or no position encoding): the one mixer whose cache grows with the
context."""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import Field

from fsc.mixers.spec import MixerShape, MixerSpec
from fsc.sections import ADDED, MAX_HEAD_DIM, MAX_HEADS, Bad, Section


class AttentionCfg(Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    n_kv_heads: int | None = Field(None, ge=1, le=MAX_HEADS)
    head_dim: int | None = Field(None, ge=1, le=MAX_HEAD_DIM)
    # Below 1 the rotary frequencies would rise with the dimension instead of falling.
    rope_theta: float = Field(10000.0, ge=1.0, le=1e12, allow_inf_nan=False)
    # rope: rotary encoding of absolute positions on q and k. none (NoPE): no position encoding
    # at all; order reaches attention only through the causal mask and, in a hybrid, through the
    # recurrent layers, which is what lets it read past its training length.
    position: Literal["rope", "none"] = Field("rope", json_schema_extra=ADDED)


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
    if head_dim % 2 and a.position == "rope":  # RoPE rotates pairs of dimensions
        field = "head_dim" if a.head_dim else "n_heads"
        raise Bad(("attention", field), f"makes head_dim {head_dim} odd; RoPE rotates pairs of "
                  "dimensions", getattr(a, field), "an even head_dim")


def _at_width(cfg: dict, d_model: int, scale: float) -> dict:
    """Heads scaled with the width, keeping the query heads per KV head."""
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
    return cfg


def _shape(recipe) -> MixerShape:
    d = recipe.d_model
    h, hkv, hd = dims(recipe.attention, d)
    kv = (hkv * hd, 0)  # k, v: [B, capacity, Hkv, D]
    return MixerShape("attention", ((d, h * hd), (d, hkv * hd), (d, hkv * hd), (h * hd, d)), 0,
                      {"k": kv, "v": kv}, attn_flops_per_pair=4 * h * hd)


SPEC = MixerSpec(kind="attention", letter="A", order=0, section=AttentionCfg, shape=_shape,
                 ops=("block_attention",), tag="attention", check=_check, at_width=_at_width)
