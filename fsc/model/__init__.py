"""Models from recipes: one torch module per mixer kind, composed with norms and MLP/MoE.

Each kind of the registry (fsc.mixers) has its module here, `fsc/model/<kind>.py`, whose
Mixer subclass is listed in `MIXER_REGISTRY`.
"""

from fsc.mixers import KINDS
from fsc.model.attention import Attention
from fsc.model.gated_delta import GatedDelta
from fsc.model.gla import GLA
from fsc.model.linear import LinearAttention
from fsc.model.mamba import Mamba

MIXER_REGISTRY = {cls.kind: cls for cls in (Attention, Mamba, LinearAttention, GLA, GatedDelta)}
assert tuple(MIXER_REGISTRY) == KINDS, "fsc.model lists a torch module for each kind, in order"
