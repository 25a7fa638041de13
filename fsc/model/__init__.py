"""Models from recipes: one torch module per mixer kind, composed with norms and MLP/MoE.

Each kind of the registry (fsc.mixers) has its module here, `fsc/model/<kind>.py`, whose
Mixer subclass is listed once below; `MIXER_REGISTRY` maps each kind to it, in the registry's
order.
"""

from fsc.mixers import KINDS
from fsc.model.attention import Attention
from fsc.model.gated_delta import GatedDelta
from fsc.model.gla import GLA
from fsc.model.linear import LinearAttention
from fsc.model.mamba import Mamba

_MODULES = {cls.kind: cls for cls in (Attention, Mamba, LinearAttention, GLA, GatedDelta)}
assert set(_MODULES) == set(KINDS), (
    "fsc.model lists a torch module (a Mixer subclass whose `kind` is the spec's) for each kind of "
    f"fsc.mixers.MIXERS: no module for {sorted(set(KINDS) - set(_MODULES))}, "
    f"no spec for {sorted(set(_MODULES) - set(KINDS))}")
MIXER_REGISTRY = {kind: _MODULES[kind] for kind in KINDS}  # in the registry's order
