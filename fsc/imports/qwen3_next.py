"""Qwen3-Next (transformers' Qwen3NextForCausalLM): Gated DeltaNet layers and gated attention
(by default three to one: `full_attention_interval` 4, or `layer_types`), each followed by a
mixture of SwiGLU experts with a gated shared expert.

What maps to fsc's options: the zero-centred RMSNorms (`norm_offset`); attention with qk-norm,
partial RoPE (`partial_rotary_factor`, 0.25 by default) and an output gate (`q_proj` holds each
head's query and gate side by side); the Gated DeltaNet with grouped value heads, a causal conv
over q, k and v (without bias), FLA's l2norm (eps 1e-6) and a gated RMSNorm on its
output (`in_proj_qkvz` and `in_proj_ba` hold q, k, v, z and b, a per query/key head, each head's
value heads side by side); the router's renormalised top-k (`norm_topk_prob`) and the shared
expert's sigmoid gate. The multi-token-prediction head (`mtp.*`) is not part of the causal LM
and is left out, as transformers leaves it out.
"""

from __future__ import annotations

import re

from fsc.imports import llama
from fsc.imports.config import Config
from fsc.mixers import gated_delta

ARCHITECTURES = ("Qwen3NextForCausalLM",)

NAMES = (
    (r"embed\.weight", "model.embed_tokens.weight"),
    (r"layers\.(\d+)\.norm1\.weight", r"model.layers.\1.input_layernorm.weight"),
    (r"layers\.(\d+)\.norm2\.weight", r"model.layers.\1.post_attention_layernorm.weight"),
    (r"norm_f\.weight", "model.norm.weight"),
    (r"lm_head\.weight", "lm_head.weight"),
)

IGNORED = (r"mtp\..*",)  # the multi-token-prediction head: not part of the causal LM

L2NORM_EPS = 1e-6  # transformers' (and FLA's) l2norm of q and k
LAYER_KINDS = {"linear_attention": "gated_delta", "full_attention": "attention"}
# transformers' Qwen3NextConfig defaults where they are not fsc's (fsc.imports.llama.DEFAULTS)
DEFAULTS = {"Qwen3NextForCausalLM": {"num_key_value_heads": 2, "head_dim": 256}}


def _layer_kinds(cfg: Config, n_layers: int) -> list[str]:
    """fsc's mixer of each layer, from `layer_types` or, without it, attention at every
    `full_attention_interval`-th layer."""
    types = cfg.get("layer_types")
    if types is None:
        every = cfg.int("full_attention_interval", 4)
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention"
                 for i in range(n_layers)]
    unknown = sorted(set(types) - set(LAYER_KINDS))
    if unknown:
        raise cfg.refuse(f"layer_types {unknown}", "fsc imports linear_attention and "
                         "full_attention layers")
    if len(types) != n_layers:
        raise cfg.refuse(f"layer_types of {len(types)} entries for {n_layers} layers")
    return [LAYER_KINDS[t] for t in types]


def _layers(kinds: list[str]) -> dict:
    """The layers section: Gated DeltaNet by default, attention at its positions (`every` when
    they are regular)."""
    at = [i + 1 for i, k in enumerate(kinds) if k == "attention"]
    if len(at) == len(kinds):
        return {"default": "attention"}
    layers: dict = {"default": "gated_delta"}
    if at:
        regular = at == list(range(at[0], len(kinds) + 1, at[0]))
        layers["attention"] = {"every": at[0]} if regular else {"positions": at}
    return layers


def _gated_delta(cfg: Config) -> dict:
    heads, v_heads = cfg.int("linear_num_key_heads", 16), cfg.int("linear_num_value_heads", 32)
    dk, dv = cfg.int("linear_key_head_dim", 128), cfg.int("linear_value_head_dim", 128)
    if dk != dv:
        raise cfg.refuse(f"linear_key_head_dim {dk} != linear_value_head_dim {dv}",
                         "fsc's Gated DeltaNet keeps square [head_dim, head_dim] states")
    if v_heads % heads:
        raise cfg.refuse(f"linear_num_value_heads {v_heads} not a multiple of "
                         f"linear_num_key_heads {heads}")
    out = {"n_heads": heads, "head_dim": dk, "d_conv": cfg.int("linear_conv_kernel_dim", 4),
           "gated_norm": True, "l2norm_eps": L2NORM_EPS}
    if v_heads != heads:
        out["n_v_heads"] = v_heads
    return out


def _ffn(cfg: Config, n_layers: int) -> dict:
    """moe when every layer's FFN is the MoE block, mlp when none is; a mix is refused."""
    experts = cfg.int("num_experts", 512)
    dense, step = sorted(set(cfg.get("mlp_only_layers") or [])), cfg.int("decoder_sparse_step", 1)
    sparse = [experts > 0 and i not in dense and (i + 1) % step == 0 for i in range(n_layers)]
    if not any(sparse):
        return {"mlp": llama.swiglu(cfg, biased=False)}
    if not all(sparse):
        raise cfg.refuse(f"dense and MoE layers mixed (mlp_only_layers {dense}, "
                         f"decoder_sparse_step {step})", "every fsc layer has the same FFN")
    if not cfg.get("norm_topk_prob", True):
        raise cfg.refuse("norm_topk_prob false", "fsc's router renormalises the chosen "
                         "experts' weights")
    moe = {"n_experts": experts, "top_k": cfg.int("num_experts_per_tok", 10), "kind": "swiglu",
           "hidden": cfg.int("moe_intermediate_size", 512)}
    shared = cfg.int("shared_expert_intermediate_size", 512)
    if shared:
        moe.update(shared_hidden=shared, shared_gate=True)
    return {"moe": moe}


def recipe(cfg: Config, name: str) -> dict:
    cfg.need("hidden_act", ("silu",), default="silu")
    out = cfg.common(name, tie_default=False)
    d, n = out["d_model"], out["n_layers"]
    kinds = _layer_kinds(cfg, n)
    out.update(norm_eps=cfg.float("rms_norm_eps", 1e-6), norm_offset=True, layers=_layers(kinds))
    if "attention" in kinds:
        attn = llama.attention(cfg, d, partial=0.25)
        if cfg.get("attention_bias", False):
            attn["bias"] = "qkvo"
        out["attention"] = {**attn, "qk_norm": True, "output_gate": True}
    if "gated_delta" in kinds:
        out["gated_delta"] = _gated_delta(cfg)
    out.update(_ffn(cfg, n))
    return out


# -- tensors ------------------------------------------------------------------------------------
def tensor(name: str, read, recipe):
    """fsc's tensor `name` from the published ones (`read(published name)`), or None where
    NAMES gives it. A layer's mixer tensors depend on its kind."""
    m = re.fullmatch(r"layers\.(\d+)\.(mixer|ffn)\.(.+)", name)
    if m is None:
        return None
    i, part, leaf = int(m[1]), m[2], m[3]
    at = f"model.layers.{i}."
    if part == "ffn":
        return _ffn_tensor(leaf, read, at + "mlp.", recipe)
    if recipe.layer_plan[i] == "attention":
        return _attention_tensor(leaf, read, at + "self_attn.", recipe)
    return _gated_delta_tensor(leaf, read, at + "linear_attn.", recipe)


def _attention_tensor(leaf: str, read, at: str, recipe):
    """q_proj holds, per head, the query's head_dim rows then the gate's."""
    m = re.fullmatch(r"w([qg])\.(weight|bias)", leaf)
    if m:
        t = read(f"{at}q_proj.{m[2]}")
        heads = recipe.attention.n_heads
        return t.view(heads, 2, -1, *t.shape[1:])[:, "qg".index(m[1])].flatten(0, 1)
    m = re.fullmatch(r"w([kvo])\.(weight|bias)", leaf)
    if m:
        return read(f"{at}{m[1]}_proj.{m[2]}")
    return read(at + leaf)  # q_norm.weight, k_norm.weight


def _gated_delta_tensor(leaf: str, read, at: str, recipe):
    """in_proj_qkvz holds, per query/key head, its q and k rows, then those of v and z for the
    value heads it serves; in_proj_ba, per query/key head, b then a of its value heads."""
    v_heads, heads, dim = gated_delta.dims(recipe.gated_delta, recipe.d_model)[:3]
    group = v_heads // heads
    if leaf in ("wq.weight", "wk.weight", "wv.weight", "wz.weight"):
        t = read(at + "in_proj_qkvz.weight")
        parts = t.view(heads, -1, t.shape[-1]).split([dim, dim, group * dim, group * dim], 1)
        return parts["qkvz".index(leaf[1])].flatten(0, 1)
    if leaf in ("wb.weight", "wa.weight"):
        t = read(at + "in_proj_ba.weight")
        return t.view(heads, 2, group, t.shape[-1])[:, "ba".index(leaf[1])].flatten(0, 1)
    names = {"wo.weight": "out_proj.weight", "conv_weight": "conv1d.weight",
             "norm.weight": "norm.weight", "A_log": "A_log", "dt_bias": "dt_bias"}
    return read(at + names[leaf])


def _ffn_tensor(leaf: str, read, at: str, recipe):
    """Experts [E, in, out] stacked from each expert's [out, in] projections; the router, the
    shared expert and its gate by name (a dense MLP likewise)."""
    if recipe.moe is None:
        return read(f"{at}{leaf.split('.')[0]}_proj.weight")
    if leaf in ("gate", "up", "down"):
        first = read(f"{at}experts.0.{leaf}_proj.weight")
        out = first.new_empty((recipe.moe.n_experts, *first.mT.shape))
        out[0] = first.mT
        for e in range(1, recipe.moe.n_experts):
            out[e] = read(f"{at}experts.{e}.{leaf}_proj.weight").mT
        return out
    m = re.fullmatch(r"shared\.(gate|up|down)\.weight", leaf)
    if m:
        return read(f"{at}shared_expert.{m[1]}_proj.weight")
    names = {"router.weight": "gate.weight", "shared_gate.weight": "shared_expert_gate.weight"}
    return read(at + names[leaf])
