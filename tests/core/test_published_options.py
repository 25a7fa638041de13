"""Recipe options of published models: SwiGLU of an explicit width, no FFN, tied embeddings,
attention biases, qk-norm, RoPE scaling, Mamba-2's gated norm; Qwen3-Next's zero-centred norms,
gated attention, Gated DeltaNet options (grouped value heads, conv, gated norm, l2norm eps) and
SwiGLU experts with a gated shared expert. Defaults change nothing."""

import math

import pytest
import torch
import yaml
from model_checks import blockwise

from fsc.errors import RecipeError
from fsc.model.layers import RMSNorm, rope_frequencies
from fsc.model.lm import build_model
from fsc.recipe import load_recipe, parse_recipe

BASE = {"name": "opts", "d_model": 64, "n_layers": 4, "vocab_size": 97, "block_size": 4,
        "dtype": "fp32"}
HYBRID = {**BASE, "tie_embeddings": True,
          "layers": {"default": "mamba", "attention": {"every": 2}},
          "attention": {"n_heads": 4, "n_kv_heads": 2, "head_dim": 24, "bias": "qkvo",
                        "qk_norm": True, "rope_dims": 12,
                        "rope_scaling": {"kind": "llama3", "factor": 8.0,
                                         "original_context": 16}},
          "mamba": {"head_dim": 16, "gated_norm": True},
          "mlp": {"kind": "swiglu", "hidden": 80}}
# Qwen3-Next's shape: Gated DeltaNet layers and a gated attention layer, SwiGLU experts.
NEXT = {**BASE, "norm_offset": True, "layers": {"pattern": "DDAD"},
        "attention": {"n_heads": 4, "n_kv_heads": 2, "head_dim": 24, "rope_dims": 6,
                      "qk_norm": True, "output_gate": True, "bias": "qkvo"},
        "gated_delta": {"n_heads": 2, "n_v_heads": 4, "head_dim": 16, "d_conv": 4,
                        "gated_norm": True, "l2norm_eps": 1e-6},
        "moe": {"n_experts": 4, "top_k": 2, "kind": "swiglu", "hidden": 32, "shared_hidden": 48,
                "shared_gate": True}}


def _bad(data: dict, *words: str) -> None:
    with pytest.raises(RecipeError) as e:
        parse_recipe(data)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg


def test_options_are_refused_when_inconsistent():
    _bad({**BASE, "layers": {"default": "attention"}, "attention": {"n_heads": 4},
          "mlp": {"hidden": 96, "hidden_ratio": 2}}, "mlp.hidden", "not both")
    _bad({**BASE, "layers": {"default": "mamba"}, "mlp": {"kind": "none", "hidden": 8}},
         "mlp.kind", "none has no width")
    _bad({**BASE, "layers": {"default": "attention"},
          "attention": {"n_heads": 4, "position": "none",
                        "rope_scaling": {"kind": "linear", "factor": 2.0}}},
         "attention.rope_scaling", "without RoPE")
    _bad({**BASE, "layers": {"default": "attention"},
          "attention": {"n_heads": 4, "rope_scaling": {"kind": "llama3", "factor": 8.0,
                                                       "low_freq_factor": 4.0}}},
         "high_freq_factor", "must exceed")
    _bad({**BASE, "layers": {"default": "attention"},
          "attention": {"n_heads": 4, "rope_scaling": {"kind": "yarn", "factor": 2.0}}},
         "attention.rope_scaling.kind")
    _bad({**BASE, "layers": {"default": "attention"}, "attention": {"n_heads": 4, "bias": "o"}},
         "attention.bias")
    _bad({**BASE, "layers": {"default": "attention"},
          "attention": {"n_heads": 4, "rope_dims": 7}}, "attention.rope_dims", "even")
    _bad({**BASE, "layers": {"default": "attention"},
          "attention": {"n_heads": 4, "rope_dims": 32}}, "attention.rope_dims", "at most")
    _bad({**NEXT, "gated_delta": {"n_heads": 2, "n_v_heads": 3}}, "gated_delta.n_v_heads",
         "multiple of n_heads 2")
    _bad({**NEXT, "moe": {"n_experts": 4, "hidden": 32, "hidden_ratio": 2}}, "moe.hidden",
         "not both")
    _bad({**NEXT, "moe": {"n_experts": 4, "shared_gate": True}}, "moe.shared_gate",
         "shared_hidden")


def test_defaults_leave_models_and_yaml_as_they_were():
    """An option at its default adds no parameter and no YAML line; seeded weights are the
    same tensors in the same order as a recipe without the option's keys."""
    plain = load_recipe("tiny_hybrid")
    spelled = parse_recipe({**plain.model_dump(mode="json", exclude_none=True),
                            "tie_embeddings": False,
                            "attention": {**plain.attention.model_dump(mode="json"),
                                          "bias": "none", "qk_norm": False}})
    assert spelled.recipe_hash == plain.recipe_hash
    assert spelled.to_yaml() == plain.to_yaml()
    for key in ("tie_embeddings", "bias", "qk_norm", "gated_norm", "kind"):
        assert key not in plain.to_yaml()
    a, b = build_model(plain, seed=5), build_model(spelled, seed=5)
    assert list(a.state_dict()) == list(b.state_dict())
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())


@pytest.mark.parametrize("extra", [
    {"norm_offset": False, "attention": {"output_gate": False}},
    {"gated_delta": {"n_v_heads": None, "d_conv": None, "gated_norm": False, "l2norm_eps": None}},
    {"moe": {"kind": "gelu", "hidden": None, "shared_hidden": None, "shared_gate": False}},
])
def test_qwen3_next_options_at_their_defaults_change_nothing(extra):
    """Hash, YAML and seeded weights of a recipe whose sections spell the new options at their
    defaults: those of the recipe without them."""
    data = {**BASE, "layers": {"pattern": "ADM"}, "n_layers": 3, "attention": {"n_heads": 4},
            "gated_delta": {"n_heads": 4}, "mamba": {"head_dim": 16},
            "moe": {"n_experts": 4, "top_k": 2, "hidden_ratio": 2}}
    plain = parse_recipe(data)
    spelled = parse_recipe({**data, **{k: {**data[k], **v} if isinstance(v, dict) else v
                                       for k, v in extra.items()}})
    assert spelled.recipe_hash == plain.recipe_hash and spelled.to_yaml() == plain.to_yaml()
    a, b = build_model(plain, seed=5), build_model(spelled, seed=5)
    assert list(a.state_dict()) == list(b.state_dict())
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())


def test_options_build_the_modules_they_name():
    r = parse_recipe(HYBRID)
    assert parse_recipe(yaml.safe_load(r.to_yaml())) == r
    m = build_model(r, seed=1)
    names = set(m.state_dict())
    assert "lm_head.weight" not in names  # tied: the head reads the embedding
    assert {"layers.1.mixer.wq.bias", "layers.1.mixer.wo.bias", "layers.1.mixer.q_norm.weight",
            "layers.1.mixer.k_norm.weight", "layers.0.mixer.norm.weight",
            "layers.0.ffn.gate.weight"} <= names
    assert m.layers[0].ffn.gate.weight.shape == (80, 64)
    bare = parse_recipe({**BASE, "layers": {"default": "mamba"}, "mlp": {"kind": "none"}})
    assert not any(".ffn." in k or "norm2" in k for k in build_model(bare).state_dict())


def test_qwen3_next_options_build_the_modules_they_name():
    r = parse_recipe(NEXT)
    assert parse_recipe(yaml.safe_load(r.to_yaml())) == r
    m = build_model(r, seed=1)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes["layers.2.mixer.wg.weight"] == (96, 64) and "layers.2.mixer.wg.bias" in shapes
    assert shapes["layers.0.mixer.wq.weight"] == (32, 64)  # 2 query/key heads of 16
    assert shapes["layers.0.mixer.wv.weight"] == shapes["layers.0.mixer.wz.weight"] == (64, 64)
    assert shapes["layers.0.mixer.wa.weight"] == (4, 64)  # one decay per value head
    assert shapes["layers.0.mixer.conv_weight"] == (128, 4)  # q | k | v, no bias
    assert "layers.0.mixer.conv_bias" not in shapes
    assert shapes["layers.0.mixer.norm.weight"] == (16,)
    assert shapes["layers.0.ffn.gate"] == shapes["layers.0.ffn.up"] == (4, 64, 32)
    assert shapes["layers.0.ffn.shared.gate.weight"] == (48, 64)
    assert shapes["layers.0.ffn.shared_gate.weight"] == (1, 64)
    assert m.empty_cache(2, 8).layers[0].tensors["conv"].shape == (2, 128, 3)
    # zero-centred: the layer norms, the final norm and the qk-norm start at 0 (scale 1); the
    # Gated DeltaNet's output norm is a plain one
    for name in ("layers.0.norm1.weight", "norm_f.weight", "layers.2.mixer.q_norm.weight"):
        assert not m.state_dict()[name].any(), name
    assert torch.equal(m.state_dict()["layers.0.mixer.norm.weight"], torch.ones(16))


def test_a_zero_centred_norm_scales_by_one_plus_its_weight():
    x = torch.randn(3, 16, generator=torch.Generator().manual_seed(0))
    w = torch.randn(16, generator=torch.Generator().manual_seed(1))
    offset, plain = RMSNorm(16, 1e-6, offset=True), RMSNorm(16, 1e-6)
    with torch.no_grad():
        offset.weight.copy_(w)
        plain.weight.copy_(1 + w)
    assert torch.equal(offset(x), plain(x))


@pytest.mark.parametrize("G", [1, 4])
@pytest.mark.parametrize("recipe", [HYBRID, NEXT], ids=["hybrid", "qwen3_next"])
@torch.no_grad()
def test_cached_equals_blockwise_with_every_option(recipe, G):
    m = build_model(parse_recipe(recipe), seed=2).eval()
    for name, p in m.named_parameters():  # larger weights and nonzero biases: all of it matters
        if ".mixer." in name and p.ndim == 2:
            p.mul_(5.0)
        elif ".mixer.w" in name and name.endswith("bias"):
            p.fill_(0.1)
    tokens, ref, cache, spans = blockwise(m, G, 97)
    for span in spans:
        torch.testing.assert_close(m.fold(tokens[:, span], cache), ref[:, span], rtol=0, atol=1e-5)


@pytest.mark.parametrize("G", [1, 3])
@torch.no_grad()
def test_two_stream_form_equals_its_reference_loop_with_every_option(G):
    """The batched two-stream forms (the conv window from the clean stream, grouped value
    heads, the output gates) against a `forward_blockwise` per noised block."""
    m = build_model(parse_recipe({**NEXT, "block_size": G}), seed=2).eval()
    g = torch.Generator().manual_seed(4)
    x, xn = torch.randn(2, 5 * G, 64, generator=g), torch.randn(2, 3 * G, 64, generator=g)
    blocks = torch.tensor([[0, 2, 4], [3, 1, 3]])
    for layer in m.layers:
        for got, want in zip(layer.mixer.forward_two_stream(x, xn, blocks),
                             layer.mixer.forward_two_stream_loop(x, xn, blocks), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_llama3_rope_frequencies_follow_the_published_rule():
    """Frequencies above original_context / high_freq_factor kept, below original_context /
    low_freq_factor divided by factor, in between blended (Llama 3.1, theta 500000)."""
    from fsc.mixers.attention import RopeScaling

    s = RopeScaling(kind="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                    original_context=8192)
    plain = rope_frequencies(128, 500000.0)
    got = rope_frequencies(128, 500000.0, s)
    wavelen = 2 * math.pi / plain
    high, low = wavelen < 8192 / 4, wavelen > 8192
    assert high.any() and low.any() and (~high & ~low).any()
    assert torch.equal(got[high], plain[high])
    torch.testing.assert_close(got[low], plain[low] / 8)
    mid = ~high & ~low
    smooth = (8192 / wavelen[mid] - 1) / 3
    torch.testing.assert_close(got[mid], (1 - smooth) * plain[mid] / 8 + smooth * plain[mid])
    lin = RopeScaling(kind="linear", factor=4.0)
    torch.testing.assert_close(rope_frequencies(16, 1e4, lin), rope_frequencies(16, 1e4) / 4)
