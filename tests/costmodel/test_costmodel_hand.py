"""Cost-model figures derived by hand, arithmetic written out (no torch in this file)."""

import pytest

from fsc.costmodel import (
    DEVICES,
    CacheBytes,
    DeviceSpec,
    Memory,
    cache_bytes,
    device_spec,
    estimate,
    fits,
    memory,
    param_counts,
    pass_cost,
    predict_point,
    prompt_memory,
    resolve_device,
    tensor_bytes,
)
from fsc.errors import UsageError
from fsc.recipe import load_recipe, parse_recipe

KiB, MiB, GiB = 2**10, 2**20, 2**30


def test_mission_unit_example():
    # hybrid_24_8: d_model 4096, 32 heads × 128 MHA, d_inner = 2 × 4096 = 8192, N = 16, bf16 states.
    r = load_recipe("hybrid_24_8")
    # KV per attention layer per sequence at S = 8192: k and v each 8192 · 32 · 128 · 2 B = 64 MiB;
    # together 2 · 8192 · 32 · 128 · 2 B = 134,217,728 B = 128 MiB.
    kv = tensor_bytes(r, "attention", 1, 8192)
    assert kv == {"k": 64 * MiB, "v": 64 * MiB}
    assert sum(kv.values()) == 2 * 8192 * 32 * 128 * 2 == 128 * MiB
    # Mamba ssm state per layer per sequence: d_inner · N · 2 B = 8192 · 16 · 2 = 262,144 B
    # = 256 KiB, whatever S is; the conv window adds (d_inner + 2N) · (d_conv - 1) · 2 B
    # = 8224 · 3 · 2 = 49,344 B.
    for S in (0, 8192, 262144):
        assert tensor_bytes(r, "mamba", 1, S) == {"ssm": 256 * KiB, "conv": 49_344}
    # Whole model, B = 1: 8 attention layers · 128 MiB = 1 GiB; 24 Mamba layers · 311,488 B.
    assert cache_bytes(r, 1, 8192) == CacheBytes(kv_bytes=GiB, state_bytes=24 * 311_488)
    assert cache_bytes(r, 1, 8192).total_bytes == GiB + 24 * 311_488
    # B multiplies both (each sequence owns its cache): B = 8 → 8 GiB of KV.
    assert cache_bytes(r, 8, 8192).kv_bytes == 8 * GiB


def test_linear_attention_state():
    # linear_24_8: 32 heads, Dv = 4096 / 32 = 128, r = 128, bf16 state_dtype, but linear
    # attention's sums are fp32 always: state 32 · 128 · 128 · 4 B = 2 MiB; z 32 · 128 · 4 B
    # = 16,384 B; no growth with S.
    r = load_recipe("linear_24_8")
    assert r.state_dtype == "bf16"
    assert tensor_bytes(r, "linear", 1, 0) == {"state": 2 * MiB, "z": 16 * KiB}
    assert tensor_bytes(r, "linear", 3, 100_000) == {"state": 6 * MiB, "z": 48 * KiB}
    # 24 linear layers hold the fixed state; 8 attention layers hold 2 · 32 · 128 · 2 B per token.
    assert cache_bytes(r, 1, 10).as_dict() == {
        "kv_bytes": 8 * 10 * 16 * KiB,
        "state_bytes": 24 * (2 * MiB + 16 * KiB),
        "total_bytes": 8 * 10 * 16 * KiB + 24 * (2 * MiB + 16 * KiB),
    }


def _moe_recipe():
    return parse_recipe({
        "name": "moe_hand", "d_model": 64, "n_layers": 2, "vocab_size": 100, "dtype": "fp32",
        "layers": {"default": "attention"}, "attention": {"n_heads": 4},
        "moe": {"n_experts": 16, "top_k": 2, "hidden_ratio": 2},
    })


def test_moe_weights_read_versus_resident():
    r = _moe_recipe()
    # hidden = int(2 · 64) = 128; one expert = up 64·128 + down 128·64 = 16,384 params
    # = 65,536 B in fp32;
    # router 64 · 16 = 1,024 params per layer.
    assert param_counts(r)["moe"] == 2 * (1024 + 16 * 16_384)
    one = estimate(r, S=0, B=1, G=1, K=1).moe()
    # T = B·G = 1 token reads its top-2 experts: 2 layers · (1,024 + 2 · 16,384) · 4 B = 270,336 B.
    assert one["experts_read_per_layer"] == 2
    assert one["read_bytes_per_step"] == 270_336
    # Resident: 2 layers · (1,024 + 16 · 16,384) · 4 B = 2,105,344 B.
    assert one["resident_bytes"] == 2_105_344
    # Active per token: all parameters minus 2 layers · 14 unchosen experts · 16,384.
    assert one["active_params_per_token"] == param_counts(r)["total"] - 2 * 14 * 16_384
    # T = 2 · 4 = 8 tokens · 2 = 16 experts at most: every expert; T = 16 is bounded by 16.
    assert estimate(r, S=0, B=2, G=4, K=1).moe()["read_bytes_per_step"] == 2_105_344
    assert estimate(r, S=0, B=4, G=4, K=1).moe()["experts_read_per_layer"] == 16
    # Weights read per pass, T = 8 versus T = 1: 2 layers · 14 more experts · 65,536 B, plus
    # 7 more embedding rows · 64 · 4 B = 1,835,008 + 1,792 B.
    diff = pass_cost(r, 0, 2, 4).weight_bytes - pass_cost(r, 0, 1, 1).weight_bytes
    assert diff == 1_835_008 + 1_792


def _hand_recipe():
    return parse_recipe({
        "name": "hand", "d_model": 1024, "n_layers": 1, "vocab_size": 1000, "dtype": "bf16",
        "layers": {"default": "attention"},
        "attention": {"n_heads": 8, "n_kv_heads": 2, "head_dim": 128},
        "mlp": {"hidden_ratio": 4},
    })


def test_floor_time_by_hand():
    r = _hand_recipe()
    # Parameters: wq 1024·1024 + wk 1024·256 + wv 1024·256 + wo 1024·1024 = 2,621,440;
    # MLP 2 · 1024 · 4096 = 8,388,608; norms 3 · 1024 = 3,072; embed + lm_head 2 · 1000 · 1024.
    assert param_counts(r) == {"attention": 2_621_440, "mlp": 8_388_608, "norm": 3_072,
                               "embedding": 2_048_000, "total": 13_061_120}
    # Point S = 4096, B = 2, G = 4 (T = 8 tokens), one step (no cache write).
    p = pass_cost(r, 4096, 2, 4)
    # Weights read: 2,621,440 + 8,388,608 + 3,072 + 8 embedding rows · 1024 + lm_head 1,024,000
    # = 12,045,312 params · 2 B = 24,090,624 B.
    assert p.weight_bytes == 24_090_624
    # KV read: 2 (k, v) · B 2 · S 4096 · Hkv 2 · D 128 · 2 B = 8,388,608 B.
    assert p.kv_read_bytes == 8_388_608
    # Activations: per token embed 1024 + projections (2048 + 1280 + 1280 + 2048) + MLP
    # 2 · (1024 + 4096) + head 1024 + 1000 = 19,944 elements · 8 tokens · 2 B = 319,104 B.
    assert p.activation_bytes == 319_104
    assert p.bytes == 24_090_624 + 8_388_608 + 319_104 == 32_798_336
    # Matmul FLOPs 2 · 8 · (2,621,440 + 1,024,000 + 8,388,608) = 192,544,768;
    # attention 4 · 8 tokens · (4096 + 4) keys · 8 heads · 128 = 134,348,800.
    assert (p.matmul_flops, p.attention_flops, p.scan_flops) == (192_544_768, 134_348_800, 0)
    # 1 TB/s, 100 TFLOP/s: 32,798,336 B / 1e12 = 32.798336 µs > 326,893,568 / 1e14 = 3.27 µs.
    spec = DeviceSpec("hand", 10**9, 1e12, 100e12)
    pred = predict_point(r, 4096, 2, 4, 4, spec)
    assert pred["bound"] == "memory"
    assert pred["floor_ms"] == pytest.approx(0.032798336, rel=1e-12)
    # The fold also writes G new K/V positions: 2 · 2 · 4 · 2 · 128 · 2 B = 8,192 B.
    assert pred["predicted_fold_bytes"] == 32_798_336 + 8_192
    # tokens/s = B·G / (K·t_step + t_fold) = 8 / (4 · 32.798336 + 32.806528) µs.
    assert pred["predicted_tokens_per_s"] == pytest.approx(8 / 163.999872e-6, rel=1e-12)
    # At 1 TFLOP/s the FLOPs dominate: 326,893,568 / 1e12 s = 0.326893568 ms.
    slow = predict_point(r, 4096, 2, 4, 4, DeviceSpec("slow", 10**9, 1e12, 1e12))
    assert (slow["bound"], slow["floor_ms"]) == ("compute", pytest.approx(0.326893568, rel=1e-12))
    # Memory: weights 13,061,120 · 2 B; cache with room for S + G = 4100 tokens
    # 2 · 2 · 4100 · 256 · 2 B = 8,396,800; activations 8 · (2 · 1024 + 4096) · 2 B = 98,304
    # plus logits 8 · 1000 · (2 + 4) B = 48,000.
    mem = memory(r, 4096, 2, 4)
    assert mem == Memory(weight_bytes=26_122_240, cache_capacity_bytes=8_396_800,
                         activation_bytes=146_304)
    assert mem.total_bytes == 34_665_344
    # The parts in order, then the total: the keys `fsc estimate --json` and the store show.
    assert list(mem.as_dict().items()) == [
        ("weight_bytes", 26_122_240), ("cache_capacity_bytes", 8_396_800),
        ("activation_bytes", 146_304), ("total_bytes", 34_665_344)]
    assert pred["predicted_total_bytes"] == 34_665_344
    assert fits(r, 4096, 2, 4, 34_665_344) and not fits(r, 4096, 2, 4, 34_665_343)


def test_a_prompt_folded_in_one_pass_by_hand():
    r = _hand_recipe()
    # P = 1000 tokens at G = 4: per token (2 · 1024 + the MLP's 4096) · 2 B = 12,288 B; the head
    # reads the last token alone, 1000 · (2 + 4) B; the 1000 × 1000 mask of which block sees
    # which, 1 B a pair as booleans and 4 B as the fp32 copy attention makes of it. The cache has
    # room for P + G: 2 (k, v) · 1004 · 2 · 128 · 2 B = 1,028,096.
    mem = prompt_memory(r, 1000, 1, 4)
    assert mem == Memory(weight_bytes=26_122_240, cache_capacity_bytes=1_028_096,
                         activation_bytes=12_288_000 + 6_000 + 5_000_000)
    # A causal prompt (G = 1) and a sliding window build no mask.
    assert prompt_memory(r, 1000, 1, 1).activation_bytes == 12_294_000
    window = parse_recipe({
        "name": "hand_swa", "d_model": 1024, "n_layers": 1, "vocab_size": 1000, "dtype": "bf16",
        "layers": {"default": "attention"},
        "attention": {"n_heads": 8, "n_kv_heads": 2, "head_dim": 128, "window": 64},
        "mlp": {"hidden_ratio": 4},
    })
    assert prompt_memory(window, 1000, 1, 4).activation_bytes == 12_294_000


def test_ar_versus_diffusion_sweeps():
    r = _hand_recipe()
    e = estimate(r, S=4096, B=2, G=4, K=2, gpu=DeviceSpec("hand", 10**9, 1e12, 100e12))
    c = e.comparison
    # AR: one weight sweep per token; diffusion: K + 1 = 3 passes per G = 4 tokens.
    assert (c["ar_weight_sweeps_per_token"], c["diffusion_weight_sweeps_per_token"]) == (1.0, 0.75)
    assert c["sweep_crossover_steps"] == 3  # (K + 1) / 4 < 1 exactly when K < 3
    # At the floor crossover K, K·t_step + t_fold = G·t_ar.
    t_ar = pass_cost(r, 4096, 2, 1, fold=True).floor(e.device)[0]
    t_step, t_fold = e.step.floor(e.device)[0], e.fold.floor(e.device)[0]
    assert c["floor_crossover_steps"] * t_step + t_fold == pytest.approx(4 * t_ar)
    ar = estimate(r, S=4096, B=2, mode="ar", gpu=e.device)
    assert (ar.G, ar.K, ar.step) == (1, 0, ar.fold)  # the AR forward predicts and folds
    assert ar.tokens_per_s == pytest.approx(c["ar_tokens_per_s"])


def test_max_batch_and_oom_context_are_the_edges():
    r = load_recipe("hybrid_3b")
    M = DEVICES["h100"].memory_bytes
    e = estimate(r, S=262144, B=8, gpu="h100")
    b = e.max_batch
    assert b >= 1 and not e.fits
    total = {B: memory(r, 262144, B, 32).total_bytes for B in (b, b + 1)}
    assert total[b] <= M < total[b + 1]
    s = e.oom_context
    assert memory(r, s - 1, 8, 32).total_bytes <= M < memory(r, s, 8, 32).total_bytes
    # No growing cache: memory never runs out with S; weights alone too big: nothing fits.
    assert estimate(load_recipe("mamba_3b"), S=8192, B=8).oom_context is None
    tiny = estimate(r, S=0, B=1, memory_gb=1.0)
    assert (tiny.max_batch, tiny.oom_context, tiny.fits) == (0, 0, False)


def test_device_table_and_lookup():
    assert DEVICES["h100"] == DeviceSpec("H100 SXM", 81_559 * MiB, 3.35e12, 989e12)
    assert DEVICES["h200"].bandwidth_bytes_per_s == 4.8e12
    assert DEVICES["a100"].peak_flops == 312e12
    assert device_spec("NVIDIA H200") is DEVICES["h200"]
    assert device_spec("NVIDIA H100 80GB HBM3") is DEVICES["h100"]
    assert device_spec("NVIDIA A100-SXM4-80GB") is DEVICES["a100"]
    assert device_spec("H100") is DEVICES["h100"]
    for other in ("NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA A100-PCIE-40GB", "cpu", "tpu v5"):
        assert device_spec(other) is None
    spec = resolve_device("h200", bandwidth_tb_s=4.0, tflops=500, memory_gb=100)
    assert spec == DeviceSpec("H200", 100 * 10**9, 4.0e12, 500e12)
    assert resolve_device("my-gpu", 1, 2, 3) == DeviceSpec("my-gpu", 3 * 10**9, 1e12, 2e12)


@pytest.mark.parametrize("kwargs, message", [
    ({"S": -1}, "S must be"),
    ({"B": 0}, "B must be"),
    ({"G": 0}, "G must be"),
    ({"K": 0}, "K (--steps) must be"),
    ({"mode": "ar", "G": 4}, "G must be 1"),
    ({"mode": "ar", "K": 2}, "no denoising steps"),
    ({"mode": "fast"}, "mode must be"),
    ({"gpu": "tpu"}, "unknown GPU 'tpu'"),
    ({"bandwidth_tb_s": 0.0}, "--bandwidth must be a positive"),
    ({"tflops": -5.0}, "--tflops must be a positive"),
    ({"memory_gb": float("nan")}, "--memory must be a positive"),
])
def test_bad_figures_are_usage_errors(kwargs, message):
    args = {"S": 1024, "B": 1} | kwargs
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        estimate(load_recipe("tiny_attn"), **args)


def _stack(n_layers, **sizes):
    return parse_recipe({"name": "stack", "n_layers": n_layers, "vocab_size": 1000,
                         "layers": {"pattern": "MA"}, "attention": {"n_heads": 8},
                         "mamba": {"head_dim": 64}} | {"d_model": 512} | sizes)


def test_sums_over_layers_are_count_times_one_kind():
    # 2 layers (one of each kind) against 1024 (512 of each): every per-layer figure scales by 512.
    two, many = _stack(2), _stack(1024)
    p2, pn = param_counts(two), param_counts(many)
    assert (pn["attention"], pn["mamba"]) == (512 * p2["attention"], 512 * p2["mamba"])
    c2, cn = cache_bytes(two, 3, 100), cache_bytes(many, 3, 100)
    assert (cn.kv_bytes, cn.state_bytes) == (512 * c2.kv_bytes, 512 * c2.state_bytes)
    s2, sn = pass_cost(two, 100, 3, 4), pass_cost(many, 100, 3, 4)
    assert (sn.kv_read_bytes, sn.state_read_bytes) == (512 * s2.kv_read_bytes, 512 * s2.state_read_bytes)
    assert (sn.attention_flops, sn.scan_flops) == (512 * s2.attention_flops, 512 * s2.scan_flops)


def test_the_largest_recipe_the_schema_allows_is_estimated_at_once():
    # Every bound at its maximum: Python integers do not overflow and the floats stay finite.
    big = _stack(1024, d_model=65536, vocab_size=2**22, block_size=4096,
                 attention={"n_heads": 1024, "head_dim": 1024},
                 mamba={"d_state": 1024, "expand": 16, "d_conv": 64, "head_dim": 1024},
                 mlp={"hidden_ratio": 64})
    d = estimate(big, S=10**6, B=1024).to_dict()
    assert d["param_count"] > 8 * 10**14 and d["tokens_per_s"] > 0 and d["floor_ms"] < float("inf")


def test_a_prompt_folded_a_chunk_at_a_time_by_hand():
    r = _hand_recipe()
    # chunks of 248 tokens (whole blocks of 4): the live set of 248 tokens, 248 · 12,288 B, and
    # the last chunk's 248 × 1000 mask against the whole prompt, 5 B a pair
    mem = prompt_memory(r, 1000, 1, 4, chunk=248)
    assert mem.activation_bytes == 248 * 12_288 + 6_000 + 5 * 248 * 1000
    assert prompt_memory(r, 1000, 1, 4, chunk=251) == mem  # rounded down to whole blocks
    assert prompt_memory(r, 1000, 1, 4, chunk=4096) == prompt_memory(r, 1000, 1, 4)
