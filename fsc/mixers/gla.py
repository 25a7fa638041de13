"""Gated linear attention: a per-key-dimension forget gate, forward and in-block backward scans."""

from __future__ import annotations

from pydantic import Field

from fsc.mixers.spec import MixerShape, MixerSpec
from fsc.sections import MAX_HEAD_DIM, MAX_HEADS, Section, head_dims, square_state_rules


class GlaCfg(Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    head_dim: int | None = Field(None, ge=1, le=MAX_HEAD_DIM)
    # log gate = logsigmoid(x) / normalizer: 1 is a plain logsigmoid gate, 16 the usual choice.
    gate_logit_normalizer: float = Field(16.0, ge=1.0, le=1024.0, allow_inf_nan=False)


dims = head_dims  # (n_heads, head_dim)
_check, _at_width = square_state_rules("gla")


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
