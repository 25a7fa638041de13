"""Gated DeltaNet: the delta rule with a scalar per-head decay, both directions in the block.

The state h [Dk, Dv] per head is decayed by exp(g_t), then written at key k_t with strength
beta_t so that it recalls v_t there: h ← exp(g_t) h + beta_t k_t (v_t − kᵀ_t h)ᵀ. Keys and
queries are L2-normalised; the decay is Mamba-2's, g = −exp(A_log)·softplus(a_t + dt_bias).
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field

from fsc.mixers.spec import MixerShape, MixerSpec
from fsc.sections import (
    ADDED,
    MAX_CONV,
    MAX_HEAD_DIM,
    MAX_HEADS,
    Bad,
    Section,
    heads_dividing,
    rescaled_heads,
)


class GatedDeltaCfg(Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)  # query and key heads
    head_dim: int | None = Field(None, ge=1, le=MAX_HEAD_DIM)  # Dk = Dv
    # Grouped value heads (Qwen3-Next): n_v_heads value heads, each with its own state, decay
    # and write strength; query/key head i serves value heads i·r to i·r + r − 1, where
    # r = n_v_heads / n_heads. None: one value head per query/key head.
    n_v_heads: int | None = Field(None, ge=1, le=MAX_HEADS, json_schema_extra=ADDED)
    # A short causal depthwise conv without bias (then SiLU) over q, k and v before the rule,
    # continuing from a cached window of d_conv − 1 inputs (forward direction), as Mamba-2's.
    # None: no conv.
    d_conv: int | None = Field(None, ge=1, le=MAX_CONV, json_schema_extra=ADDED)
    # Each head's output RMS-normalised (one weight [head_dim] shared by the heads, eps the
    # recipe's norm_eps), then gated by silu(wz x), before wo (Qwen3-Next, FLA's GatedDeltaNet).
    gated_norm: bool = Field(False, json_schema_extra=ADDED)
    # The L2 normalisation of q and k: None, q / max(‖q‖, 1e-12); a number ε,
    # q / sqrt(‖q‖² + ε) (FLA's and Qwen3-Next's l2norm, ε 1e-6).
    l2norm_eps: float | None = Field(None, ge=0.0, le=1.0, allow_inf_nan=False,
                                     json_schema_extra=ADDED)


class Dims(NamedTuple):
    n_heads: int  # value heads: states, decays, write strengths
    n_qk_heads: int
    head_dim: int  # Dk = Dv
    d_conv: int  # 0: no conv
    conv_dim: int  # q, k and v go through the conv


def dims(cfg: GatedDeltaCfg, d_model: int) -> Dims:
    hd = cfg.head_dim or d_model // cfg.n_heads
    hv = cfg.n_v_heads or cfg.n_heads
    return Dims(hv, cfg.n_heads, hd, cfg.d_conv or 0, (2 * cfg.n_heads + hv) * hd)


def _check(cfg: GatedDeltaCfg, d_model: int) -> None:
    heads_dividing(d_model, "gated_delta", cfg.n_heads, cfg.head_dim)
    if cfg.n_v_heads is not None and cfg.n_v_heads % cfg.n_heads:
        raise Bad(("gated_delta", "n_v_heads"), f"not a multiple of n_heads {cfg.n_heads}",
                  cfg.n_v_heads, "a multiple of n_heads")


def _at_width(cfg: dict, d_model: int, scale: float) -> dict:
    """Query/key heads rescaled (head_dim then follows from the width); value heads kept at
    the same multiple of them."""
    group = cfg.get("n_v_heads", cfg["n_heads"]) // cfg["n_heads"]
    cfg = rescaled_heads(cfg, d_model, scale, "head_dim")
    if "n_v_heads" in cfg:
        cfg["n_v_heads"] = cfg["n_heads"] * group
    return cfg


def _shape(recipe) -> MixerShape:
    d, cfg = recipe.d_model, recipe.gated_delta
    h, hqk, hd, w, c = dims(cfg, d)
    # wq, wk, wv; wa (decay input) and wb (write strength), one per value head; wo; wz (gate)
    linears = ((d, hqk * hd), (d, hqk * hd), (d, h * hd), (d, h), (d, h), (h * hd, d))
    linears += ((d, h * hd),) if cfg.gated_norm else ()
    extra = 2 * h + c * w + (hd if cfg.gated_norm else 0)  # A_log, dt_bias; conv; norm
    cache = {"state": (0, h * hd * hd)}  # [B, H, Dk, Dv]
    if w:
        cache["conv"] = (0, c * (w - 1))  # [B, C, W-1]
    # per direction per state element: decay (1), recall kᵀh (2), write (2), q readout (2);
    # the conv, 2 per tap and channel
    return MixerShape("gated_delta", linears, extra, cache,
                      scan_flops_per_token=h * 2 * 7 * hd * hd + 2 * c * w)


SPEC = MixerSpec(kind="gated_delta", letter="D", order=4, section=GatedDeltaCfg, shape=_shape,
                 ops=("gated_delta_block",), tag="gated-deltanet", check=_check,
                 at_width=_at_width)
