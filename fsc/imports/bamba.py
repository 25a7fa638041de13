"""Bamba (transformers' BambaForCausalLM): an attention + Mamba-2 hybrid whose layers are fsc's
own shape, norm → mixer (Mamba-2, or attention at `attn_layer_indices`) then norm → SwiGLU.

Its attention rotates half of each head (partial RoPE, `attention.rope_dims`); its Mamba-2
mixer is transformers' Mamba2 one (gated RMSNorm, eps rms_norm_eps), with one B/C group only.
"""

from __future__ import annotations

from fsc.imports import llama, mamba2
from fsc.imports.config import Config

ARCHITECTURES = ("BambaForCausalLM",)

NAMES = llama.names("pre_ff_layernorm", "feed_forward", "final_layernorm",
                    *mamba2.mixer_names(r"model.layers.\1.mamba"))

ABSENT_AS_ZERO = (r"layers\.\d+\.mixer\.conv_bias",)  # mamba_conv_bias: false

# transformers' BambaConfig defaults where they are not fsc's (see fsc.imports.llama.DEFAULTS)
DEFAULTS = {"BambaForCausalLM": {"num_key_value_heads": 8}}


def recipe(cfg: Config, name: str) -> dict:
    mamba2.check_mixer(cfg, "mamba_n_groups", 1, "mamba_proj_bias")
    out = cfg.common(name, tie_default=False)
    d = out["d_model"]
    expand, heads = cfg.int("mamba_expand", 2), cfg.int("mamba_n_heads", 128)
    head_dim = cfg.get("mamba_d_head", "auto")
    head_dim = expand * d // heads if head_dim == "auto" else cfg.int("mamba_d_head")
    if heads * head_dim != expand * d:
        raise cfg.refuse(f"mamba_n_heads {heads} × mamba_d_head {head_dim} != mamba_expand × "
                         f"hidden_size {expand * d}", "fsc's heads split expand × d_model")
    attn_at = sorted({int(i) + 1 for i in cfg.get("attn_layer_indices") or []})
    layers: dict = {"default": "mamba"}
    if attn_at:
        attn = llama.attention(cfg, d, partial=0.5)
        if cfg.get("attention_bias", False):
            attn["bias"] = "qkvo"
        layers["attention"] = {"positions": attn_at}
        out["attention"] = attn
    out.update(norm_eps=cfg.float("rms_norm_eps", 1e-5), layers=layers,
               mamba={"d_state": cfg.int("mamba_d_state", 256), "expand": expand,
                      "d_conv": cfg.int("mamba_d_conv", 4), "head_dim": head_dim,
                      "gated_norm": True},
               mlp=llama.swiglu(cfg))
    return out
