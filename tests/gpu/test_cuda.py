"""Checks that need a CUDA device: run by `make gpu-check` (pytest -m gpu), skipped elsewhere."""

import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") == "1",
                       reason="run with TRITON_INTERPRET=0 to compile for the GPU"),
]


def test_every_kernel_matches_its_reference_in_bf16():
    from fsc.kernels import op_folders
    from fsc.kernels.selfcheck import check_kernels

    rows = check_kernels("cuda")
    assert {r["op"].split(" ")[0] for r in rows} == set(op_folders())  # every kernel folder
    assert all(r["ok"] for r in rows), [r for r in rows if not r["ok"]]


@pytest.mark.parametrize("name", ["tiny_hybrid", "tiny_linear", "tiny_gla", "tiny_gated_delta"])
@torch.no_grad()
def test_triton_backend_decodes_like_the_reference(name):
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    steps_alike_on_both_backends(build_model(load_recipe(name), device="cuda", seed=1).eval(), 300)


def steps_alike_on_both_backends(model, S: int) -> None:
    """Three blocks stepped and folded after a synthetic cache of S tokens give the same
    logits on the torch reference ops and on the Triton kernels."""
    from fsc import ops

    tokens = torch.randint(0, 256, (2, 12), device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    logits = {}
    for backend in ("torch", "triton"):
        with ops.backend(backend):
            cache = model.synthetic_cache(2, S, "cuda", seed=3, capacity=S + 12, block_size=4)
            out = []
            for b in range(3):
                blk = tokens[:, 4 * b : 4 * b + 4]
                out.append(model(blk, cache))
                model.fold(blk, cache)
            logits[backend] = torch.cat(out, 1)
    torch.testing.assert_close(logits["triton"], logits["torch"], rtol=1e-3, atol=1e-3)


def test_profile_on_cuda_records_triton_backends(tmp_path):
    res = subprocess.run([sys.executable, "-m", "fsc", "profile", "-r", "tiny_hybrid", "--S", "4096",
                          "--B", "2", "--device", "cuda", "--store", str(tmp_path), "--json"],
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    [point] = json.loads(res.stdout)["points"]
    assert point["status"] == "ok"
    assert point["mixer_backends"] == {"mamba": "triton", "attention": "triton"}
    assert point["peak_bytes"] >= point["cache_bytes"]


@pytest.mark.parametrize("form", ["chunk", "scan"])
@torch.no_grad()
def test_gla_forms_match_the_reference_at_3b_shapes(form):
    """Both GLA forms at the 3B shapes (20 heads × 128, G 32: two sub-chunks, so the chunk
    form's pass 2 reads what pass 1 stored through its barrier), bf16 in, fp32 state."""
    import math

    import torch.nn.functional as F
    from fsc.kernels import _common
    from fsc.kernels.gla import triton as gla
    from fsc.kernels.gla.reference import gla_block_ref

    gen = torch.Generator("cuda").manual_seed(0)
    B, G, H, D = 2, 32, 20, 128
    q, k, v = (torch.randn(B, G, H, D, device="cuda", generator=gen).bfloat16() for _ in range(3))
    gk = F.logsigmoid(torch.randn(B, G, H, D, device="cuda", generator=gen)) / 16
    state = torch.randn(B, H, D, D, device="cuda", generator=gen)
    want = torch.empty_like(state)
    ref = gla_block_ref(q.float(), k.float(), v.float(), gk, state, 1 / math.sqrt(D), want)
    new = torch.full_like(state, float("nan"))
    with _common.tuned(gla, form=form):
        out = gla.gla_block(q, k, v, gk, state, 1 / math.sqrt(D), new)
    assert ((out.float() - ref).abs().max() / ref.abs().max()).item() < 2e-2
    assert ((new - want).abs().max() / want.abs().max()).item() < 1e-2


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_gated_delta"])
@torch.no_grad()
def test_a_step_replayed_from_a_cuda_graph_equals_the_eager_step(name):
    from fsc.graphs import GraphedStep
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    model = build_model(load_recipe(name), device="cuda", seed=1).eval()
    cache = model.synthetic_cache(2, 64, "cuda", seed=3, capacity=80, block_size=4)
    step = GraphedStep(model)
    gen = torch.Generator("cuda").manual_seed(0)
    for fold in (False, True, False):
        for _ in range(3):
            tokens = torch.randint(0, 256, (2, 4), device="cuda", generator=gen)
            assert torch.equal(step(tokens, cache), model(tokens, cache))
        if fold:
            model.fold(tokens, cache)
    # a fixed-state model's step does not depend on the length: one capture across the fold,
    # its replay after it reading the state the fold wrote in place
    assert (step.captures, step.replays) == (2 if name == "tiny_attn" else 1, 9)


@pytest.mark.parametrize("name", ["tiny_mamba", "tiny_linear", "tiny_gla", "tiny_gated_delta",
                                  "tiny_attn", "tiny_hybrid"])
@torch.no_grad()
def test_a_fold_and_step_replayed_from_one_capture_equal_the_eager_ones(name):
    """Fixed states, and attention made static (its length on the device): one capture of
    the step and one of the fold serve every length."""
    from fsc.graphs import GraphedFold, GraphedStep, make_static
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    model = build_model(load_recipe(name), device="cuda", seed=1).eval()
    ref = model.synthetic_cache(2, 64, "cuda", seed=3, capacity=80, block_size=4)
    cache = model.synthetic_cache(2, 64, "cuda", seed=3, capacity=80, block_size=4)
    make_static(model, cache)
    fold, step = GraphedFold(model), GraphedStep(model)
    gen = torch.Generator("cuda").manual_seed(0)
    for _ in range(3):
        tokens = torch.randint(0, 256, (2, 4), device="cuda", generator=gen)
        torch.testing.assert_close(step(tokens, cache), model(tokens, ref), atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(fold(tokens, cache), model.fold(tokens, ref), atol=2e-5,
                                   rtol=1e-5)
        assert cache.length == ref.length
        for c, r in zip(cache.layers, ref.layers):
            for k in r.tensors:
                n = c.length if c.kind == "attention" else None
                torch.testing.assert_close(c.tensors[k][:, :n], r.tensors[k][:, :n], atol=2e-5,
                                           rtol=1e-5)
    assert (fold.captures, fold.replays, step.captures) == (1, 3, 1)


@pytest.mark.parametrize("name", ["tiny_hybrid", "tiny_gla", "tiny_mamba", "tiny_attn",
                                  "passkey_hybrid_swa"])
def test_decoding_with_cuda_graphs_gives_the_eager_tokens(name):
    from fsc.decode import DecodeConfig, generate
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe
    from fsc.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    model = build_model(load_recipe(name), device="cuda", seed=5).eval()
    with torch.no_grad():  # sharper logits: static attention (graphs) sums in another order
        model.lm_head.weight.mul_(20)
    runs = [generate(model, tok, [tok.bos_id] + tok.encode("Hi there"),
                     DecodeConfig(length=16, G=4, steps=3, temperature=0.0, graphs=g), device="cuda")
            for g in (False, True)]
    ar = [generate(model, tok, [tok.bos_id] + tok.encode("Hi there"),  # the fold replayed
                   DecodeConfig(length=12, G=4, steps=1, mode="ar", graphs=g), device="cuda")
          for g in (False, True)]
    assert ar[0].token_ids == ar[1].token_ids
    assert runs[0].token_ids == runs[1].token_ids
    # the whole step captured (forward, the device pick, the reveal): sampled, the draws made
    # outside the graph give the eager samples; a threshold ends a block early as eager does
    for hot in ({"temperature": 1.0, "top_p": 0.9, "policy": "random"},
                {"temperature": 0.8, "policy": "entropy", "threshold": 0.3}):
        both = [generate(model, tok, [tok.bos_id] + tok.encode("Hi there"),
                         DecodeConfig(length=16, G=4, steps=3, graphs=g, seed=3, **hot),
                         device="cuda") for g in (False, True)]
        assert both[0].token_ids == both[1].token_ids
        assert both[0].stats["steps_used"] == both[1].stats["steps_used"]
    # tiny_hybrid's MoE layers too: a decode-sized pass runs its experts densely
    assert runs[1].stats["graphs"] and not runs[0].stats["graphs"]


@pytest.mark.parametrize("name", ["tiny_hybrid", "tiny_gla", "tiny_mamba", "tiny_attn",
                                  "tiny_gated_delta"])
def test_prompts_of_several_lengths_decoded_together_on_cuda_give_each_alone(name):
    """The batched decoder with graphs on the device: rows of 11, 2 and 9 bytes right-aligned
    in one batch give each prompt's tokens decoded alone (padding reaching no state or key),
    by diffusion and AR."""
    from model_checks import ragged_rows_decode_alone

    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    ragged_rows_decode_alone(build_model(load_recipe(name), device="cuda", seed=5).eval())


@torch.no_grad()
def test_a_decay_read_by_position_decodes_on_triton_as_on_torch():
    """`mamba.decay_from`: the op's rate per token on the GPU kernel against the torch
    reference, step and fold past the start; and a decode with graphs (captured per length, a
    step not being length-free) gives the eager tokens."""
    from model_checks import variant

    from fsc.decode import DecodeConfig, generate
    from fsc.model.lm import build_model
    from fsc.tokenizer import ByteTokenizer

    recipe = variant("tiny_hybrid", {"mamba.decay_from": 8, "mamba.decay_power": 0.5})
    model = build_model(recipe, device="cuda", seed=1).eval()
    steps_alike_on_both_backends(model, 20)
    tok = ByteTokenizer()
    model.lm_head.weight.mul_(20)
    runs = [generate(model, tok, [tok.bos_id] + tok.encode("Hi there"),
                     DecodeConfig(length=16, G=4, steps=3, temperature=0.0, graphs=g), device="cuda")
            for g in (False, True)]
    assert runs[0].token_ids == runs[1].token_ids
