"""Linear attention: feature map φ on q and k, a floored normaliser, no decay."""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import Field, field_validator

from fsc.mixers.spec import MixerShape, MixerSpec
from fsc.sections import (
    EPS_RANGE,
    MAX_FEATURES,
    MAX_HEADS,
    Bad,
    Section,
    heads_dividing,
    rescaled_heads,
)


class LinearCfg(Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    feature_map: Literal["elu1", "relu"] = "elu1"
    feature_dim: int | None = Field(None, ge=1, le=MAX_FEATURES)
    eps: float = Field(1e-6, allow_inf_nan=False, **EPS_RANGE)

    @field_validator("feature_map", mode="before")
    @classmethod
    def _positive(cls, v):
        # o = φ(q)·S / max(φ(q)·z, eps): with φ ≥ 0 the ratio is a weighted mean of values; an
        # identity φ lets φ(q)·z reach zero or below, where the output is divided by eps.
        if v == "identity":
            raise Bad((), "identity can make the normaliser φ(q)·z zero or negative", v,
                      "elu1, relu (non-negative feature maps)")
        return v


class Dims(NamedTuple):
    n_heads: int
    head_dim: int  # Dv
    feature_dim: int  # r


def dims(cfg: LinearCfg, d_model: int) -> Dims:
    head_dim = d_model // cfg.n_heads
    return Dims(cfg.n_heads, head_dim, cfg.feature_dim or head_dim)


def _check(cfg: LinearCfg, d: int) -> None:
    heads_dividing(d, "linear", cfg.n_heads, None, explicit_ok=False)


def _at_width(cfg: dict, d_model: int, scale: float) -> dict:
    return rescaled_heads(cfg, d_model, scale, "feature_dim")


def _shape(recipe) -> MixerShape:
    d = recipe.d_model
    h, dv, r = dims(recipe.linear, d)
    linears = ((d, h * r), (d, h * r), (d, h * dv), (h * dv, d))
    # state [B, H, r, Dv], z [B, H, r]; fp32 (sums without decay drift in 16 bits)
    cache = {"state": (0, h * r * dv), "z": (0, h * r)}
    # per head: φ(k)vᵀ add (2·r·Dv), z add (r), q·S readout (2·r·Dv), q·z (2·r)
    return MixerShape("linear", linears, 0, cache, scan_flops_per_token=h * (4 * r * dv + 3 * r),
                      cache_dtype="fp32")


SPEC = MixerSpec(kind="linear", letter="L", order=2, section=LinearCfg, shape=_shape,
                 ops=("linear_block",), tag="linear-attention", check=_check, at_width=_at_width)
