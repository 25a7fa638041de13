"""Bidirectional Mamba-2 (per-head scalar decay, one B/C group, a short causal conv)."""

from __future__ import annotations

from typing import NamedTuple

from pydantic import Field, model_validator

from fsc.mixers.spec import MixerShape, MixerSpec
from fsc.sections import ADDED, MAX_CONV, MAX_EXPAND, MAX_HEAD_DIM, MAX_STATE, Bad, Section


class MambaCfg(Section):
    d_state: int = Field(16, ge=1, le=MAX_STATE)
    expand: int = Field(2, ge=1, le=MAX_EXPAND)
    d_conv: int = Field(4, ge=1, le=MAX_CONV)
    head_dim: int = Field(64, ge=1, le=MAX_HEAD_DIM)
    # Mamba-2's gated RMSNorm: RMSNorm (with weight, eps the recipe's norm_eps) over y·silu(z)
    # before out_proj. Off: y·silu(z) goes to out_proj as is.
    gated_norm: bool = Field(False, json_schema_extra=ADDED)
    # Every head's decay rate A times this: a token's decay a = exp(dt·A) becomes a^decay_scale,
    # so below 1 the state forgets more slowly (1/r keeps the decay over r times the training
    # length what it was over the training length). Changes no weight: a checkpoint can be
    # scored with it (`fsc eval --set mamba.decay_scale=0.25`).
    decay_scale: float = Field(1.0, gt=0, le=64.0, allow_inf_nan=False, json_schema_extra=ADDED)
    # Decay scaled by position past the training length (the decay's counterpart of
    # `attention.logn`): a token at position p with p + 1 > decay_from has its decay rate A
    # times (decay_from / (p + 1)) ** decay_power, so the decay summed over a context of T
    # tokens grows as log(T / decay_from) past it (power 1) rather than as T. Within
    # decay_from nothing changes; no weight changes (`fsc eval --set mamba.decay_from=128`).
    decay_from: int | None = Field(None, ge=1, le=2**24, json_schema_extra=ADDED)
    decay_power: float = Field(1.0, gt=0, le=4.0, allow_inf_nan=False, json_schema_extra=ADDED)
    # A bound on the state's memory: every token decays the state at least by 2^(-1/max_half_life)
    # (its log decay dt·A capped at -ln 2 / max_half_life), so what a token wrote is at most
    # half there max_half_life tokens later, whatever the weights learn. Trained with it, the
    # layers that must carry a fact further than that are the others (attention, in a hybrid);
    # changes no weight (`fsc eval --set mamba.max_half_life=none` scores without it).
    max_half_life: float | None = Field(None, gt=0, le=2**24, allow_inf_nan=False,
                                        json_schema_extra=ADDED)

    @model_validator(mode="after")
    def _power_needs_a_start(self):
        if self.decay_power != 1.0 and self.decay_from is None:
            raise Bad(("decay_power",), "scales the decay past decay_from, which is not set",
                      self.decay_power, "1, or any power with decay_from (e.g. the training "
                      "length) set too")
        return self


class Dims(NamedTuple):
    d_inner: int
    n_heads: int
    head_dim: int
    d_state: int
    d_conv: int
    conv_dim: int  # x, B and C go through the conv


def dims(cfg: MambaCfg, d_model: int) -> Dims:
    d_inner = cfg.expand * d_model
    return Dims(d_inner, d_inner // cfg.head_dim, cfg.head_dim, cfg.d_state, cfg.d_conv,
                d_inner + 2 * cfg.d_state)


def _check(m: MambaCfg, d: int) -> None:
    if (m.expand * d) % m.head_dim:
        raise Bad(("mamba", "head_dim"), f"does not divide d_inner {m.expand * d} "
                  "(expand × d_model)", m.head_dim, "a divisor of expand × d_model")


def _at_width(cfg: dict, d_model: int, scale: float) -> dict:
    d_inner = cfg.get("expand", 2) * d_model
    hd = cfg.get("head_dim", 64)
    while d_inner % hd:
        hd //= 2
    cfg["head_dim"] = max(hd, 1)
    return cfg


def _shape(recipe) -> MixerShape:
    d = recipe.d_model
    m = dims(recipe.mamba, d)
    # in_proj -> z | x, B, C | dt; conv weight [C, W] + bias [C]; A_log, dt_bias, D [H]
    linears = ((d, m.d_inner + m.conv_dim + m.n_heads), (m.d_inner, d))
    extra = m.conv_dim * m.d_conv + m.conv_dim + 3 * m.n_heads
    extra += m.d_inner if recipe.mamba.gated_norm else 0
    # conv window [B, C, W-1]; ssm [B, H, P, N] with H·P = d_inner
    cache = {"conv": (0, m.conv_dim * (m.d_conv - 1)), "ssm": (0, m.d_inner * m.d_state)}
    # per direction per state element: decay multiply and dt·x·B outer-product add (3),
    # C readout (2)
    scan = 2 * 5 * m.d_inner * m.d_state + 2 * m.conv_dim * m.d_conv
    return MixerShape("mamba", linears, extra, cache, scan_flops_per_token=scan)


SPEC = MixerSpec(kind="mamba", letter="M", order=1, section=MambaCfg, shape=_shape,
                 ops=("causal_conv_block", "mamba_block_scan"), tag="mamba",
                 section_optional=True, check=_check, at_width=_at_width)
