"""Gated linear attention: a per-key-dimension forget gate, forward and in-block backward scans."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field

from fsc.mixers.spec import MixerShape, MixerSpec
from fsc.sections import MAX_HEAD_DIM, MAX_HEADS, Section, heads_dividing, rescaled_heads


class GlaCfg(Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    head_dim: int | None = Field(None, ge=1, le=MAX_HEAD_DIM)
    # log gate = logsigmoid(x) / normalizer: 1 is a plain logsigmoid gate, 16 the usual choice.
    gate_logit_normalizer: float = Field(16.0, ge=1.0, le=1024.0, allow_inf_nan=False)


class Dims(NamedTuple):
    n_heads: int
    head_dim: int  # Dk = Dv


def dims(cfg: GlaCfg, d_model: int) -> Dims:
    return Dims(cfg.n_heads, cfg.head_dim or d_model // cfg.n_heads)


def _check(cfg: GlaCfg, d: int) -> None:
    heads_dividing(d, "gla", cfg.n_heads, cfg.head_dim)


def _at_width(cfg: dict, d_model: int, scale: float) -> dict:
    return rescaled_heads(cfg, d_model, scale, "head_dim")


def _shape(recipe) -> MixerShape:
    d = recipe.d_model
    h, hd = dims(recipe.gla, d)
    linears = ((d, h * hd),) * 4 + ((h * hd, d),)  # wq, wk, wv, wg, wo
    # state [B, H, Dk, Dv]; per direction per element: gate, k vᵀ add (3), q readout (2)
    return MixerShape("gla", linears, h * hd, {"state": (0, h * hd * hd)},
                      scan_flops_per_token=h * 2 * 5 * hd * hd)


SPEC = MixerSpec(kind="gla", letter="G", order=3, section=GlaCfg, shape=_shape,
                 ops=("gla_block",), tag="gated-linear-attention", check=_check,
                 at_width=_at_width)
