"""End to end: a tiny model on the Triton backend gives the torch backend's logits."""

import pytest
import torch
from fsc.kernels import op_folders

from fsc import ops
from fsc.model.lm import build_model
from fsc.recipe import load_recipe

OPS_OF = {
    "tiny_hybrid": ("block_attention", "causal_conv_block", "mamba_block_scan"),
    "tiny_linear": ("linear_block",),
    "tiny_gla": ("gla_block",),
}


def _decode(model, tokens, backend, S, G):
    """Steps and folds over the blocks of `tokens` from a synthetic S-token cache."""
    B, T = tokens.shape
    cache = model.synthetic_cache(B, S, seed=3, capacity=S + T, block_size=G)
    logits = []
    with ops.backend(backend), torch.no_grad():
        for i in range(0, T, G):
            block = tokens[:, i : i + G]
            logits += [model(block, cache), model.fold(block, cache)]
    return logits, cache


@pytest.mark.parametrize("recipe", [
    *[pytest.param(r, marks=pytest.mark.slow)  # three kernels, each tested alone too; GLA's
      for r in ("tiny_hybrid", "tiny_gla")],   # two forms at the interpreter's pace
    *[r for r in OPS_OF if r not in ("tiny_hybrid", "tiny_gla")]])
def test_triton_backend_matches_torch(recipe):
    model = build_model(load_recipe(recipe), seed=1)
    B, G, S, n_blocks = 2, 4, 5, 3
    tokens = torch.randint(0, model.recipe.vocab_size, (B, G * n_blocks),
                           generator=torch.Generator().manual_seed(0))
    want, want_cache = _decode(model, tokens, "torch", S, G)
    with ops.trace() as ran:
        got, got_cache = _decode(model, tokens, "triton", S, G)
    assert ran.backends == dict.fromkeys(OPS_OF[recipe], "triton")
    for i, (g, w) in enumerate(zip(got, want)):
        err = ((g - w).abs().max() / w.abs().max()).item()
        assert err < 1e-4, f"logits {i} ({'fold' if i % 2 else 'step'} of block {i // 2}): {err:.3g}"
    for lg, lw in zip(got_cache.layers, want_cache.layers):
        for name in lw.tensors:
            err = ((lg.tensors[name] - lw.tensors[name]).abs().max()
                   / lw.tensors[name].abs().max()).item()
            assert err < 1e-4, f"{lg.kind} cache {name!r}: {err:.3g}"


@pytest.mark.slow  # every kernel under the interpreter again (each has its own test)
def test_verify_with_the_triton_backend_checks_every_kernel():
    import json

    from fsc_run import in_process

    res = in_process("verify", "tiny_hybrid", "--backend", "triton", "--blocks", "2", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["exact"] is True and doc["backends"]["block_attention"] == "triton"
    ops = {k["op"].split(" ")[0] for k in doc["kernels"]}
    assert ops == set(op_folders())  # every kernel folder
    assert all(k["ok"] and k["max_err"] < 1e-4 for k in doc["kernels"])
