"""Gated DeltaNet: the delta rule with a scalar per-head decay, both directions in the block.

The state h [Dk, Dv] per head is decayed by exp(g_t), then written at key k_t with strength
beta_t so that it recalls v_t there: h ← exp(g_t) h + beta_t k_t (v_t − kᵀ_t h)ᵀ. Keys and
queries are L2-normalised; the decay is Mamba-2's, g = −exp(A_log)·softplus(a_t + dt_bias).
"""

from __future__ import annotations

from pydantic import Field

from fsc.mixers.spec import MixerShape, MixerSpec
from fsc.sections import MAX_HEAD_DIM, MAX_HEADS, Section, head_dims, square_state_rules


class GatedDeltaCfg(Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    head_dim: int | None = Field(None, ge=1, le=MAX_HEAD_DIM)


dims = head_dims  # (n_heads, head_dim)
_check, _at_width = square_state_rules("gated_delta")


def _shape(recipe) -> MixerShape:
    d = recipe.d_model
    h, hd = dims(recipe.gated_delta, d)
    # wq, wk, wv; wa (decay input) and wb (write strength), one per head; wo. A_log, dt_bias.
    linears = ((d, h * hd),) * 3 + ((d, h), (d, h), (h * hd, d))
    # state [B, H, Dk, Dv]; per direction per element: decay (1), recall kᵀh (2), write (2),
    # q readout (2)
    return MixerShape("gated_delta", linears, 2 * h, {"state": (0, h * hd * hd)},
                      scan_flops_per_token=h * 2 * 7 * hd * hd)


SPEC = MixerSpec(kind="gated_delta", letter="D", order=4, section=GatedDeltaCfg, shape=_shape,
                 ops=("gated_delta_block",), tag="gated-deltanet", check=_check,
                 at_width=_at_width)
