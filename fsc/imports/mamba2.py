"""Mamba-2 (transformers' Mamba2ForCausalLM): norm → Mamba-2 mixer layers, no FFN.

fsc's Mamba-2 mixer has one B/C group; at G = 1 its backward scan is empty, so it is the causal
Mamba-2. The gated RMSNorm over y·silu(z) is `mamba.gated_norm`.
"""

from __future__ import annotations

from fsc.imports.config import Config

ARCHITECTURES = ("Mamba2ForCausalLM",)


def mixer_names(prefix: str) -> tuple[tuple[str, str], ...]:
    """The rows of fsc's Mamba-2 mixer tensors, published under `prefix` (\\1 the layer)."""
    return (
        (r"layers\.(\d+)\.mixer\.conv_(weight|bias)", prefix + r".conv1d.\2"),
        (r"layers\.(\d+)\.mixer\.(in_proj|out_proj|norm)\.weight", prefix + r".\2.weight"),
        (r"layers\.(\d+)\.mixer\.(A_log|dt_bias|D)", prefix + r".\2"),
    )


NAMES = (
    (r"embed\.weight", "backbone.embeddings.weight"),
    (r"layers\.(\d+)\.norm1\.weight", r"backbone.layers.\1.norm.weight"),
    *mixer_names(r"backbone.layers.\1.mixer"),
    (r"norm_f\.weight", "backbone.norm_f.weight"),
    (r"lm_head\.weight", "lm_head.weight"),
)

# Published tensors an option leaves out, and the value that makes fsc's module the same.
ABSENT_AS_ZERO = (r"layers\.\d+\.mixer\.conv_bias",)  # use_conv_bias: false


def _number(x) -> float | None:
    """A config number; transformers 5 writes infinity as {"__float__": "Infinity"}."""
    if isinstance(x, dict):
        x = x.get("__float__")
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def check_mixer(cfg: Config, groups_key: str, groups_default: int, bias_key: str) -> None:
    """Refused unless the Mamba-2 mixer is one fsc expresses: one B/C group, no projection
    biases, dt never clamped (time_step_limit (0, inf)). The keys are the family's names."""
    groups = cfg.int(groups_key, groups_default)
    if groups != 1:
        raise cfg.refuse(f"{groups_key} {groups}", "fsc's Mamba-2 mixer has one B/C group")
    if cfg.get(bias_key, False):
        raise cfg.refuse(bias_key, "fsc's Mamba-2 projections have no biases")
    limit = [_number(x) for x in cfg.get("time_step_limit", [0.0, "inf"]) or [0.0, "inf"]]
    if limit != [0.0, float("inf")]:
        raise cfg.refuse(f"time_step_limit {limit}", "fsc never clamps dt")


def recipe(cfg: Config, name: str) -> dict:
    cfg.need("hidden_act", ("silu",), default="silu")
    check_mixer(cfg, "n_groups", 8, "use_bias")
    out = cfg.common(name, tie_default=False)
    d, expand = out["d_model"], cfg.int("expand", 2)
    head_dim, heads = cfg.int("head_dim", 64), cfg.int("num_heads", 128)
    if heads * head_dim != expand * d:
        raise cfg.refuse(f"num_heads {heads} × head_dim {head_dim} != expand × hidden_size "
                         f"{expand * d}", "fsc's heads split expand × d_model")
    out.update(norm_eps=cfg.float("layer_norm_epsilon", 1e-5), layers={"default": "mamba"},
               mamba={"d_state": cfg.int("state_size", 128), "expand": expand,
                      "d_conv": cfg.int("conv_kernel", 4), "head_dim": head_dim,
                      "gated_norm": True},
               mlp={"kind": "none"})
    return out
