"""Models from recipes: mixers from a registry, composed with norms and MLP/MoE."""

from fsc.model.attention import Attention
from fsc.model.gla import GLA
from fsc.model.linear import LinearAttention
from fsc.model.mamba import Mamba

MIXER_REGISTRY = {"attention": Attention, "mamba": Mamba, "linear": LinearAttention, "gla": GLA}
