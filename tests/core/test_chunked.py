"""The chunked training forms equal the loops they replace (block by block, or token by token
for Gated DeltaNet): outputs and gradients, fp32, blocks of one length and of mixed lengths,
one chunk and many."""

import importlib

import pytest
import torch
from model_checks import mixing_model

from fsc.mixers.gated_delta import GatedDeltaCfg
from fsc.model.chunked import Chunks, scan
from fsc.model.lm import build_model
from fsc.recipe import load_recipe

RECURRENT = {"mamba": "tiny_mamba", "linear": "tiny_linear", "gla": "tiny_gla",
             "gated_delta": "tiny_gated_delta"}
LENGTHS = [[4] * 6, [4, 4, 3, 4, 1, 4], [1] * 20, [2, 1, 2, 2, 2, 2, 1], [8, 8, 8], [5]]


def _mixer(kind, scale=5.0):
    """Layer 0's mixer of the kind's tiny recipe, its matrices × scale (sharper gates and
    decays, larger states)."""
    return mixing_model(RECURRENT[kind], scale).layers[0].mixer


def _outputs_and_grads(mixer, form, x, lengths):
    y = form(x, lengths)
    dy = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
    return y, torch.autograd.grad(y, [x, *mixer.parameters()], dy)


def _assert_close(got, want, rel=1e-5):
    assert (got - want).abs().max() <= rel * want.abs().max(), float((got - want).abs().max())


def _check(mixer, lengths, seed=0):
    x = torch.randn(2, sum(lengths), 64, generator=torch.Generator().manual_seed(seed),
                    requires_grad=True)
    y, grads = _outputs_and_grads(mixer, mixer.forward_blockwise, x, lengths)
    y_ref, grads_ref = _outputs_and_grads(mixer, mixer.forward_blockwise_loop, x, lengths)
    _assert_close(y, y_ref)
    for g, g_ref in zip(grads, grads_ref, strict=True):
        _assert_close(g, g_ref)


@pytest.mark.parametrize("chunk", [None, 8])
@pytest.mark.parametrize("lengths", LENGTHS, ids=lambda ls: "-".join(map(str, ls[:6])))
@pytest.mark.parametrize("kind", sorted(RECURRENT))
def test_chunked_equals_loop_outputs_and_gradients(kind, lengths, chunk, monkeypatch):
    """`chunk` None: the mixer's own chunk length; 8 tokens: many chunks, and blocks longer
    than a chunk (for GLA, groups of at least 8 tokens: two blocks of 4 a group)."""
    mixer = _mixer(kind)
    if chunk is not None:
        module = importlib.import_module(type(mixer).__module__)
        monkeypatch.setattr(module, "GROUP" if kind == "gla" else "CHUNK", chunk)
    _check(mixer, lengths)


@pytest.mark.parametrize("kind", ["mamba", "gated_delta"])
def test_chunked_equals_loop_under_strong_decays(kind):
    """Decays of several units of log per token: running sums in the hundreds inside a chunk,
    where an fp32 difference of running sums would lose the segments it subtracts."""
    mixer = _mixer(kind)
    with torch.no_grad():
        mixer.dt_bias.add_(4.0)
    _check(mixer, [4] * 12, seed=2)


@pytest.mark.parametrize("lengths", [[4, 4, 3, 4, 1, 4], [1] * 12])
def test_gated_delta_options_chunked_equals_loop(lengths):
    """Qwen3-Next's Gated DeltaNet (grouped value heads, conv, gated output norm, l2norm eps):
    the chunked form and the token loop read the same projections and conv."""
    recipe = load_recipe(RECURRENT["gated_delta"]).model_copy(update={
        "gated_delta": GatedDeltaCfg(n_heads=2, n_v_heads=4, head_dim=16, d_conv=4,
                                     gated_norm=True, l2norm_eps=1e-6)})
    mixer = build_model(recipe, seed=3).layers[0].mixer
    with torch.no_grad():
        for p in mixer.parameters():
            if p.ndim == 2:
                p.mul_(5.0)
    _check(mixer, lengths)


def test_chunks_layout_pads_blocks_and_restores_tokens():
    ch = Chunks([4, 3, 4, 1], blocks_per_chunk=2, device="cpu")
    assert (ch.G, ch.m, ch.n, ch.C) == (4, 2, 2, 8)
    x = torch.arange(1, 13, dtype=torch.float32).reshape(1, 12, 1)
    packed = ch.pack(x)  # (1, 2, 8, 1)
    assert packed.flatten().tolist() == [1, 2, 3, 4, 5, 6, 7, 0, 8, 9, 10, 11, 12, 0, 0, 0]
    assert torch.equal(ch.unpack(packed), x)
    assert ch.later_in_block[0].tolist() == [False, True, True, True, False, False, False, False]


@pytest.mark.parametrize("decay_shape", [
    pytest.param((2, 5, 3, 4, 1), id="broadcast", marks=pytest.mark.slow),  # seconds: test-slow
    pytest.param((2, 5, 3, 4, 6), id="full")])
def test_scan_equals_its_loop_and_gradchecks(decay_shape):
    """`scan` (a loop autograd does not record, its backward written out): the states of the
    recurrence step by step, and gradients (fp64 gradcheck) with and without a start state."""
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(decay_shape, generator=gen, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 5, 3, 4, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 3, 4, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    states, h = scan(a, x, h0), h0
    for i in range(5):
        torch.testing.assert_close(states[:, i], h)
        h = a[:, i] * h + x[:, i]
    torch.testing.assert_close(states[:, 5], h)
    assert torch.autograd.gradcheck(scan, (a, x, h0))
    assert torch.autograd.gradcheck(lambda a, x: scan(a, x), (a, x))
