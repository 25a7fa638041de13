"""Llama, Mistral, Qwen2 and Qwen3: pre-norm attention (GQA, RoPE) + SwiGLU decoder stacks.

What differs between them is a handful of options: the projections' biases (Qwen2: q, k, v;
Llama / Qwen3 `attention_bias`: q, k, v and o), Qwen3's per-head RMSNorm of q and k, and sliding
windows (every layer's alike: attention.window, W - 1 for transformers' W).
"""

from __future__ import annotations

from fsc.imports.config import Config

ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                 "Qwen3ForCausalLM")

# What transformers' config class of each architecture assumes for a key a config.json leaves
# out, where that is not what fsc assumes (n_kv_heads = n_heads, head_dim = d_model / n_heads,
# no sliding window): Mistral attends through a window of 4096 tokens unless its config says
# `sliding_window: null`.
DEFAULTS = {
    "MistralForCausalLM": {"num_key_value_heads": 8, "sliding_window": 4096},
    "Qwen2ForCausalLM": {"num_key_value_heads": 32, "use_sliding_window": False},
    "Qwen3ForCausalLM": {"num_key_value_heads": 32, "head_dim": 128, "use_sliding_window": False},
}


def names(norm2: str, ffn: str, norm_f: str, *mixer: tuple[str, str]) -> tuple[tuple[str, str], ...]:
    """fsc tensor name -> the published one (regex substitution; \\1 the layer) in a stack laid
    out as Llama's (`model.layers.N`): the embedding, both norms, attention's projections, the
    SwiGLU and the final norm, under the family's names of the second norm, the feed-forward
    block and the final norm (`model.<norm_f>`), then the family's own `mixer` rows."""
    return (
        (r"embed\.weight", "model.embed_tokens.weight"),
        (r"layers\.(\d+)\.norm1\.weight", r"model.layers.\1.input_layernorm.weight"),
        (r"layers\.(\d+)\.norm2\.weight", rf"model.layers.\1.{norm2}.weight"),
        (r"layers\.(\d+)\.mixer\.w([qkvo])\.(weight|bias)", r"model.layers.\1.self_attn.\2_proj.\3"),
        *mixer,
        (r"layers\.(\d+)\.ffn\.(gate|up|down)\.weight", rf"model.layers.\1.{ffn}.\2_proj.weight"),
        (r"norm_f\.weight", f"model.{norm_f}.weight"),
        (r"lm_head\.weight", "lm_head.weight"),
    )


NAMES = names("post_attention_layernorm", "mlp", "norm",
              (r"layers\.(\d+)\.mixer\.([qk])_norm\.weight", r"model.layers.\1.self_attn.\2_norm.weight"))


def rope(cfg: Config, head_dim: int, partial: float = 1.0) -> dict:
    """rope_theta, rope_dims and rope_scaling of the attention section, from transformers 4's
    rope_theta / rope_scaling or 5's rope_parameters; scalings fsc cannot reproduce exactly are
    refused. `partial`: the family's rotary fraction when the config does not give one."""
    legacy, given = dict(cfg.get("rope_scaling") or {}), dict(cfg.get("rope_parameters") or {})
    kinds = [d.get("rope_type", d.get("type", "default")) for d in (legacy, given) if d]
    if len(set(kinds)) > 1:  # transformers reads one of them, which fsc does not guess
        raise cfg.refuse(f"RoPE given twice, as rope_scaling ({kinds[0]!r}) and rope_parameters "
                         f"({kinds[1]!r})", "which of the two the model uses is not said")
    params = {**legacy, **given}
    theta = params.get("rope_theta", cfg.get("rope_theta", 10000.0))
    out = {"rope_theta": float(theta)}
    fraction = float(params.get("partial_rotary_factor",
                                cfg.get("partial_rotary_factor", partial)))
    if fraction != 1.0:
        out["rope_dims"] = int(head_dim * fraction)
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return out
    if kind not in ("linear", "llama3"):
        raise cfg.refuse(f"RoPE scaling {kind!r}", "fsc reproduces linear and llama3 exactly")
    scaling = {"kind": kind, "factor": float(params["factor"])}
    if kind == "llama3":
        scaling.update(low_freq_factor=float(params["low_freq_factor"]),
                       high_freq_factor=float(params["high_freq_factor"]),
                       original_context=int(params["original_max_position_embeddings"]))
    return {**out, "rope_scaling": scaling}


# Qwen2/Qwen3 slide only layers from max_window_layers on (transformers' default 28), and only
# when use_sliding_window is set (default false); a model with no layer that far attends to the
# whole prefix. Mistral slides every layer, whatever use_sliding_window says.
WINDOW_FROM = {"Qwen2ForCausalLM": 28, "Qwen3ForCausalLM": 28}


def _sliding(cfg: Config) -> list[bool]:
    """Which layers attend through the sliding window, as transformers lays them out:
    `layer_types` where the config has it; else every layer of a Mistral with a window, and a
    Qwen's from max_window_layers on when use_sliding_window is set. None where the config
    gives no window (a sliding_attention layer without one attends to the whole prefix).
    Llama's attention masks no window, though transformers' cache keeps one where the config
    names it: refused, there being no one model to import."""
    n = cfg.int("num_hidden_layers")
    types = cfg.get("layer_types")
    window = cfg.get("sliding_window")
    if types is not None:
        kinds = set(types) - {"full_attention", "sliding_attention"}
        if kinds or len(types) != n:
            raise cfg.refuse(f"layer_types {sorted(set(types))}", "fsc imports full_attention "
                             f"and sliding_attention layers, one a layer ({n})")
        sliding = [t == "sliding_attention" and window is not None for t in types]
    elif window is None or (cfg.architecture in WINDOW_FROM
                            and not cfg.bool("use_sliding_window", False)):
        sliding = [False] * n
    else:
        first = WINDOW_FROM.get(cfg.architecture)
        first = 0 if first is None else cfg.int("max_window_layers", first)
        sliding = [i >= first for i in range(n)]
    if any(sliding) and cfg.architecture == "LlamaForCausalLM":
        raise cfg.refuse(f"sliding_window {window}", "transformers' LlamaForCausalLM masks no "
                         "window but its cache keeps one")
    return sliding


def window(cfg: Config) -> dict:
    """The recipe's attention.window for a published sliding window of W keys (the query's own
    and W - 1 before it, as transformers masks): fsc's window counts the keys before a block,
    so at G = 1 it is W - 1. Every layer must slide alike (fsc's window is the recipe's)."""
    sliding = _sliding(cfg)
    if not any(sliding):
        return {}
    W = cfg.int("sliding_window")
    if not all(sliding):
        raise cfg.refuse(f"sliding_window {W} on {sum(sliding)} of {len(sliding)} layers",
                         "fsc's attention.window is every attention layer's")
    if W < 2:
        raise cfg.refuse(f"sliding_window {W}", "a window of at least 2 keys")
    return {"window": W - 1}


def attention(cfg: Config, d_model: int, partial: float = 1.0) -> dict:
    """The attention section: heads, GQA, head_dim when it is not d_model / n_heads, RoPE."""
    h = cfg.int("num_attention_heads")
    kv = cfg.get("num_key_value_heads")  # null: one key/value head per head, as transformers
    out = {"n_heads": h, "n_kv_heads": h if kv is None else cfg.int("num_key_value_heads")}
    head_dim = cfg.get("head_dim")
    if head_dim is not None and (d_model % h or cfg.int("head_dim") != d_model // h):
        out["head_dim"] = cfg.int("head_dim")
    out.update(rope(cfg, out.get("head_dim", d_model // h), partial))
    return out


def recipe(cfg: Config, name: str) -> dict:
    arch = cfg.architecture
    slide = window(cfg)
    if arch == "Qwen2ForCausalLM":  # its q, k and v projections always have biases
        bias = "qkv"
    elif arch == "MistralForCausalLM":  # none ever (it reads no attention_bias)
        bias = "none"
    else:
        bias = "qkvo" if cfg.get("attention_bias", False) else "none"
    out = cfg.common(name, tie_default=False)
    attn = attention(cfg, out["d_model"]) | slide
    if bias != "none":
        attn["bias"] = bias
    if arch == "Qwen3ForCausalLM":
        attn["qk_norm"] = True
    out.update(norm_eps=cfg.float("rms_norm_eps", 1e-6), layers={"default": "attention"},
               attention=attn, mlp=swiglu(cfg, biased=arch == "LlamaForCausalLM"))
    return out


def swiglu(cfg: Config, biased: bool = True) -> dict:
    """The SwiGLU section; `biased`: whether the family reads mlp_bias (Llama, Bamba; the
    others' MLPs never have biases), refused when set."""
    cfg.need("hidden_act", ("silu",), default="silu")
    if biased and cfg.get("mlp_bias", False):
        raise cfg.refuse("mlp_bias", "fsc's SwiGLU has no biases")
    return {"kind": "swiglu", "hidden": cfg.int("intermediate_size")}
