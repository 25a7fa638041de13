"""Mamba-2 as state-spaces ships it: mamba_ssm's `MambaLMHeadModel` config (`d_model`, `n_layer`,
`ssm_cfg`, `pad_vocab_size_multiple`; no `architectures`) and its tensor names
(`backbone.embedding`, not transformers' `backbone.embeddings`). The model is the one of
fsc.imports.mamba2: norm → Mamba-2 mixer layers, no FFN, the gated RMSNorm over y·silu(z).

mamba_ssm's defaults (mamba_ssm.modules.mamba2.Mamba2, MixerModel) fill what a config leaves
out: d_state 128, d_conv 4, expand 2, headdim 64, ngroups 1, conv_bias true, bias false,
rmsnorm true, norm_before_gate false, D_has_hdim false, dt_limit (0, inf), norm_epsilon 1e-5,
tie_embeddings true; the vocabulary is padded up to a multiple of pad_vocab_size_multiple.
Its configs name no dtype: the recipe is bf16, as for every published config that does not say
(a `"torch_dtype": "float32"` added to the config imports it in fp32).
"""

from __future__ import annotations

import math

from fsc.imports import mamba2
from fsc.imports.config import Config

ARCHITECTURES = ("MambaLMHeadModel",)  # Config.architecture names a config of MAMBA_SSM_KEYS so

# transformers' names but one: the embedding is `backbone.embedding`, not `embeddings`
NAMES = tuple((pattern, name.replace("backbone.embeddings.", "backbone.embedding."))
              for pattern, name in mamba2.NAMES)
ABSENT_AS_ZERO = mamba2.ABSENT_AS_ZERO  # conv_bias: false


def recipe(cfg: Config, name: str) -> dict:
    ssm = cfg.get("ssm_cfg") or {}
    if not isinstance(ssm, dict):
        raise cfg.refuse(f"ssm_cfg {ssm!r}", "expected an object")
    sub = Config(ssm, f"{cfg.source}: ssm_cfg")
    layer = ssm.get("layer", "Mamba1")
    if layer != "Mamba2":
        raise cfg.refuse(f"ssm_cfg layer {layer!r}", "fsc's recurrent mixer is Mamba-2")
    if cfg.get("attn_layer_idx"):
        raise cfg.refuse("attn_layer_idx", "mamba_ssm's attention layers are not imported; "
                         "a Mamba-2/attention hybrid imports in Bamba's format")
    if cfg.get("d_intermediate", 0):
        raise cfg.refuse(f"d_intermediate {cfg.get('d_intermediate')}",
                         "fsc's imported Mamba-2 has no MLP")
    if not cfg.get("rms_norm", True):
        raise cfg.refuse("rms_norm false", "fsc's norms are RMSNorm")
    for key, fine, why in (("ngroups", 1, "fsc's Mamba-2 mixer has one B/C group"),
                           ("bias", False, "fsc's Mamba-2 projections have no biases"),
                           ("rmsnorm", True, "fsc's Mamba-2 output is normed"),
                           ("norm_before_gate", False, "fsc gates before its norm"),
                           ("D_has_hdim", False, "fsc's D is one number per head")):
        if ssm.get(key, fine) != fine:
            raise cfg.refuse(f"ssm_cfg {key} {ssm[key]!r}", why)
    limit = [float(x) for x in ssm.get("dt_limit", [0.0, math.inf])]
    if limit != [0.0, math.inf]:
        raise cfg.refuse(f"ssm_cfg dt_limit {limit}", "fsc never clamps dt")
    d = cfg.int("d_model")
    expand, head_dim = sub.int("expand", 2), sub.int("headdim", 64)
    if (expand * d) % head_dim:
        raise cfg.refuse(f"expand × d_model {expand * d} not a multiple of headdim {head_dim}")
    multiple = cfg.int("pad_vocab_size_multiple", 8)
    vocab = cfg.int("vocab_size")
    vocab += (-vocab) % max(multiple, 1)
    out = {"name": name, "d_model": d, "n_layers": cfg.int("n_layer"), "vocab_size": vocab,
           "block_size": 1, "dtype": cfg.dtype(), "state_dtype": "fp32",
           "norm_eps": cfg.float("norm_epsilon", 1e-5), "layers": {"default": "mamba"},
           "mamba": {"d_state": sub.int("d_state", 128), "expand": expand,
                     "d_conv": sub.int("d_conv", 4), "head_dim": head_dim, "gated_norm": True},
           "mlp": {"kind": "none"}}
    if cfg.bool("tie_embeddings", True):
        out["tie_embeddings"] = True
    return out
