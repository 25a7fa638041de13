"""The MoE's grouped form (tokens sorted by expert, one grouped matmul per projection) equals
the expert-by-expert loop: outputs and gradients, fp32, GELU experts and SwiGLU experts with a
gated shared expert."""

import pytest
import torch

from fsc.model.layers import MoE


def _moe(n_experts, top_k, d=64, hidden=128, seed=0, **options):
    gen = torch.Generator().manual_seed(seed)
    moe = MoE(d, hidden, n_experts, top_k, **options)
    with torch.no_grad():
        for p in moe.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return moe


def _outputs_and_grads(moe, form, x):
    y = form(x)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
    return [y, *torch.autograd.grad(y, [x, *moe.parameters()], dy)]


@pytest.mark.parametrize("n_experts, top_k, idle", [(4, 2, False), (8, 3, False), (6, 2, True)])
def test_grouped_equals_loop_outputs_and_gradients(n_experts, top_k, idle):
    """`idle`: one expert is never chosen (an empty group)."""
    moe = _moe(n_experts, top_k)
    x = torch.randn(3, 40, 64, generator=torch.Generator().manual_seed(2)) + 3.0
    x.requires_grad_()
    if idle:  # every token's logit for expert 0 is about -190, the others' within ±10
        with torch.no_grad():
            moe.router.weight[0] = -1.0
    assert moe._grouped_fits(x)
    got = _outputs_and_grads(moe, moe.forward, x)
    want = _outputs_and_grads(moe, moe.forward_loop, x)
    if idle:
        assert float(want[3][0].abs().max()) == 0.0  # no gradient reaches the idle expert
    for g, w in zip(got, want, strict=True):
        assert (g - w).abs().max() <= 1e-5 * w.abs().max()


def test_swiglu_experts_and_a_gated_shared_expert_grouped_equals_loop():
    """Qwen3-Next's MoE: SwiGLU experts, and a shared SwiGLU expert scaled by sigmoid(w·x)."""
    moe = _moe(8, 3, swiglu=True, shared_hidden=48, shared_gate=True)
    x = torch.randn(3, 40, 64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    got, want = (_outputs_and_grads(moe, f, x) for f in (moe.forward, moe.forward_loop))
    for g, w in zip(got, want, strict=True):
        assert (g - w).abs().max() <= 1e-5 * w.abs().max()
    with torch.no_grad():  # the shared expert's part: sigmoid(shared_gate x) · shared(x)
        flat = x.reshape(-1, 64)
        shared = torch.sigmoid(moe.shared_gate(flat)) * moe.shared(flat)
        full = moe.forward_loop(x).reshape(-1, 64)
        moe.shared = moe.shared_gate = None
        torch.testing.assert_close(full - moe.forward_loop(x).reshape(-1, 64), shared)


def test_widths_grouped_matmul_cannot_take_run_the_loop():
    moe = _moe(4, 2, d=6, hidden=10)
    x = torch.randn(2, 5, 6)
    assert not moe._grouped_fits(x)
    torch.testing.assert_close(moe(x), moe.forward_loop(x), rtol=0, atol=0)


@pytest.mark.parametrize("options", [{}, {"swiglu": True, "shared_hidden": 48, "shared_gate": True}])
def test_the_dense_form_equals_the_loop(options):
    """forward_dense (every expert on every token, weighted by its gate: the fixed shapes a CUDA
    graph holds) equals the loop: outputs and gradients, an idle expert included."""
    moe = _moe(6, 2, **options)
    with torch.no_grad():
        moe.router.weight[0] = -1.0  # expert 0 is never chosen
    x = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(3)) + 3.0
    x.requires_grad_()
    got = _outputs_and_grads(moe, moe.forward_dense, x)
    want = _outputs_and_grads(moe, moe.forward_loop, x)
    for g, w in zip(got, want, strict=True):
        assert (g - w).abs().max() <= 1e-5 * w.abs().max()


def test_a_decode_sized_pass_off_the_cpu_runs_dense(monkeypatch):
    """(The meta device stands in for CUDA.)"""
    from fsc.model import layers

    moe = _moe(4, 2)
    seen = []
    monkeypatch.setattr(layers.MoE, "forward_dense", lambda self, x: seen.append(x.shape) or x)
    x = torch.randn(1, 8, 64, device="meta")
    moe.to("meta")(x)
    assert seen == [(1, 8, 64)]
