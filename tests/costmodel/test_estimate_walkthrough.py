"""`fsc estimate` as a first user reads it: the notes beside the cache sizes name the dtype
each cache is held in and which caches grow; small floors print as numbers, not zeros; a
crossover no K reaches is said to be none; an MoE step reads its shared expert."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def wide(monkeypatch):
    from fsc.cli import common

    monkeypatch.setattr(common.out, "width", 200)  # every note whole on its line


def _row(out: str, label: str) -> str:
    (line,) = [x for x in out.splitlines() if x.strip("│ ").startswith(label)]
    return " ".join(line.replace("│", " ").split())


def test_each_cache_is_labelled_with_its_own_dtype(cli, wide):
    """linear_24_8 says state_dtype bf16, but linear attention's sums are held in fp32."""
    r = cli("estimate", "linear_24_8")
    assert r.code == 0, r.err
    assert _row(r.out, "state") == "state 48.4 MiB 24 linear (fp32); fixed size"
    assert _row(r.out, "KV cache at S") == ("KV cache at S 1.00 GiB 8 attention (bf16), grows "
                                            "with S and B")


def test_a_sliding_window_is_a_fixed_cache_not_a_growing_one(cli, wide):
    """passkey_hybrid_swa: its one attention layer keeps a ring of 32 positions; its bytes
    are in state, and the KV row does not say it grows with S."""
    r = cli("estimate", "passkey_hybrid_swa", "--S", "4096", "--B", "2", "--json")
    doc = json.loads(r.out)
    assert doc["kv_bytes"] == 0 and doc["oom_context"] is None
    # ring: 2 (k, v) · 2 sequences · 32 slots · 2 kv heads · 16 · 4 B = 16 KiB; mamba (3
    # layers): d_inner 128, C 128 + 2·64: 2 · (256·3 + 128·64) · 4 B = 71,680 B each
    assert doc["state_bytes"] == 2 * 2 * 32 * 2 * 16 * 4 + 3 * 71_680
    r = cli("estimate", "passkey_hybrid_swa", "--S", "4096", "--B", "2")
    assert r.code == 0, r.err
    assert _row(r.out, "KV cache at S") == "KV cache at S 0 bytes no layer's cache grows with S"
    assert _row(r.out, "state") == ("state 226 KiB 1 attention (window 32, fp32), "
                                    "3 mamba (fp32); fixed size")


def test_a_tiny_recipes_floor_is_not_printed_as_zero(cli, wide):
    r = cli("estimate", "tiny_attn", "--S", "0")
    assert r.code == 0, r.err
    doc = json.loads(cli("estimate", "tiny_attn", "--S", "0", "--json").out)
    step = _row(r.out, "step").split()
    # pass, bytes moved (2 words), GFLOP, FLOP/byte, floor ms, bound
    assert float(step[3]) == pytest.approx(doc["step_flops"] / 1e9, rel=1e-2)
    assert float(step[5]) == pytest.approx(doc["floor_ms"], rel=1e-2) and doc["floor_ms"] > 0
    assert f"= {doc['block_ms']:.3g} ms;" in r.out


def test_a_crossover_below_one_step_is_none(cli, wide):
    """G 2 at B 4096 and S 0 is compute-bound: the diffusion floor is never faster than ar's
    (the crossover is negative), and fewer sweeps need K < G - 1 = 1, which no K is."""
    doc = json.loads(cli("estimate", "attn_7b", "--S", "0", "--G", "2", "--steps", "1",
                         "--B", "4096", "--json").out)
    assert doc["comparison"]["floor_crossover_steps"] < 1
    r = cli("estimate", "attn_7b", "--S", "0", "--G", "2", "--steps", "1", "--B", "4096")
    assert r.code == 0, r.err
    said = " ".join(r.out.split())
    assert ("diffusion sweeps the weights less often than ar for no K >= 1; its floor is "
            "faster than ar's for no K >= 1") in said
    assert "K < -" not in said and "K < 1;" not in said


def test_an_moe_step_reads_its_shared_expert(cli):
    """Qwen3-Next has a shared expert and gate per layer, which every token runs: at a batch
    whose tokens reach every expert a step reads every MoE weight, its resident bytes."""
    doc = json.loads(cli("estimate", "published/Qwen3-Next-80B-A3B", "--B", "64",
                         "--json").out)
    moe = doc["moe"]
    assert moe["experts_read_per_layer"] == moe["n_experts"] == 512
    assert moe["read_bytes_per_step"] == moe["resident_bytes"]
    one = json.loads(cli("estimate", "published/Qwen3-Next-80B-A3B", "--json").out)["moe"]
    # 48 layers · (router 2048·512 + 10 experts · 3·2048·512 + shared 3·2048·512 + gate 2048)
    # · 2 B
    d, n = 2048, 48
    assert one["read_bytes_per_step"] == n * (d * 512 + 10 * 3 * d * 512 + 3 * d * 512 + d) * 2
