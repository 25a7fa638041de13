"""The cost model's parameter counts and cache bytes equal what built models report and allocate."""

import pytest
import torch

from fsc.costmodel import cache_bytes, estimate, memory, param_counts, tensor_bytes
from fsc.model.lm import build_model, count_params
from fsc.recipe import load_recipe, parse_recipe, shipped_recipes

SHIPPED = sorted(shipped_recipes())

# Shapes the shipped recipes do not reach: GQA, explicit GLA head_dim, r != Dv, a fractional
# hidden ratio (int() truncation), MoE with every mixer, back-dense placement, bf16 vs fp32 states.
EXTRA = [
    {"name": "mixed_moe", "d_model": 96, "n_layers": 4, "vocab_size": 50, "block_size": 8,
     "dtype": "bf16", "state_dtype": "fp32", "layers": {"pattern": "ALGM"},
     "attention": {"n_heads": 6, "n_kv_heads": 2, "head_dim": 20},
     "linear": {"n_heads": 4, "feature_dim": 16}, "gla": {"n_heads": 3, "head_dim": 20},
     "mamba": {"d_state": 12, "expand": 3, "d_conv": 3, "head_dim": 24},
     "moe": {"n_experts": 3, "top_k": 2, "hidden_ratio": 2.5}},
    {"name": "odd_mlp", "d_model": 96, "n_layers": 6, "vocab_size": 77, "dtype": "fp16",
     "state_dtype": "bf16",
     "layers": {"default": "mamba", "attention": {"count": 2, "placement": "back_dense"}},
     "attention": {"n_heads": 4}, "mamba": {"d_state": 5, "head_dim": 32},
     "mlp": {"hidden_ratio": 2.6667}},
    # The options of published models: SwiGLU of an explicit width, tied embeddings, attention
    # biases and qk-norm, RoPE scaling; Mamba-2's gated norm in a stack without FFN.
    {"name": "published_attn", "d_model": 64, "n_layers": 3, "vocab_size": 91,
     "tie_embeddings": True, "layers": {"default": "attention"},
     "attention": {"n_heads": 4, "n_kv_heads": 2, "head_dim": 24, "bias": "qkvo",
                   "qk_norm": True, "rope_scaling": {"kind": "llama3", "factor": 8.0}},
     "mlp": {"kind": "swiglu", "hidden": 150}},
    {"name": "published_qkv", "d_model": 64, "n_layers": 2, "vocab_size": 91,
     "layers": {"default": "attention"}, "attention": {"n_heads": 4, "bias": "qkv"},
     "mlp": {"kind": "swiglu", "hidden_ratio": 2.5}},
    {"name": "published_mamba", "d_model": 64, "n_layers": 2, "vocab_size": 91,
     "tie_embeddings": True, "layers": {"default": "mamba"},
     "mamba": {"head_dim": 16, "gated_norm": True}, "mlp": {"kind": "none"}},
    # Qwen3-Next's: gated attention (with biases), Gated DeltaNet with grouped value heads, a
    # conv and a gated norm, SwiGLU experts with a gated shared expert, zero-centred norms.
    {"name": "published_qwen3_next", "d_model": 64, "n_layers": 4, "vocab_size": 91,
     "norm_offset": True, "layers": {"default": "gated_delta", "attention": {"every": 4}},
     "attention": {"n_heads": 4, "n_kv_heads": 2, "head_dim": 24, "bias": "qkvo",
                   "qk_norm": True, "output_gate": True, "rope_dims": 6},
     "gated_delta": {"n_heads": 2, "n_v_heads": 6, "head_dim": 16, "d_conv": 3,
                     "gated_norm": True, "l2norm_eps": 1e-6},
     "moe": {"n_experts": 5, "top_k": 2, "kind": "swiglu", "hidden": 20, "shared_hidden": 36,
             "shared_gate": True}},
]


def _recipes():
    return [load_recipe(name) for name in SHIPPED] + [parse_recipe(d) for d in EXTRA]


@pytest.mark.parametrize("recipe", _recipes(), ids=lambda r: r.name)
def test_params_and_cache_bytes_equal_the_built_model(recipe):
    model = build_model(recipe, device="meta")  # shapes only: instant at 7B
    assert param_counts(recipe) == count_params(model)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    e = estimate(recipe, S=4096, B=3, G=1, K=1)
    assert e.memory.weight_bytes == weight_bytes
    for B, S in ((1, 0), (3, 17), (8, 262144)):
        assert cache_bytes(recipe, B, S) == model.cache_bytes(B, S)
    assert e.cache == model.cache_bytes(3, 4096)
    # Per layer and per tensor, the names and sizes of Mixer.cache_shapes.
    for layer in model.layers:
        shapes = layer.mixer.cache_shapes(2, 5)
        want = {name: torch.Size(shape).numel() * torch.empty((), dtype=dt).element_size()
                for name, (shape, dt) in shapes.items()}
        assert tensor_bytes(recipe, layer.mixer.kind, 2, 5) == want


@pytest.mark.parametrize("name", SHIPPED)
def test_allocated_cache_bytes_at_full_and_reduced_width(name):
    recipe = load_recipe(name)
    # Full width at a small S (allocating 7B-wide caches of a few tokens is cheap), then a
    # 64-wide copy of the same layer plan at a larger S and odd B.
    for r, B, S in ((recipe, 2, 3), (recipe.with_width(64), 3, 37)):
        model = build_model(r, device="meta")
        allocated = model.empty_cache(B, S, device="cpu").nbytes()
        assert allocated == cache_bytes(r, B, S)
        assert cache_bytes(r, B, S) == model.cache_bytes(B, S)
    # The cache the profiler makes (synthetic, room for S + G) is what memory() counts.
    small = recipe.with_width(64)
    model = build_model(small, device="meta")
    G = small.block_size
    made = model.synthetic_cache(2, 11, device="cpu").nbytes().total_bytes
    assert made == memory(small, 11, 2, G).cache_capacity_bytes
