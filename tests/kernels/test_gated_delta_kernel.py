import math
from functools import partial

import kernel_checks as kc
import pytest
import torch
import torch.nn.functional as F
from fsc.kernels import _common
from fsc.kernels.gated_delta import triton as gd
from fsc.kernels.gated_delta.reference import gated_delta_block_ref
from kernel_checks import BF16, F32, assert_close, nan_like, randn

from fsc.errors import KernelError

CASES = kc.KEY_VALUE_CASES + [(1, 6, 2, 20, 24, BF16, BF16)]


def _inputs(B, G, H, Dk, Dv, dtype, sdtype, seed=0):
    """Fresh random inputs as the mixer gives them: q and k L2-normalised, fp32 gates."""
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(randn(B, G, H, Dk, gen=gen), dim=-1).to(dtype)
    k = F.normalize(randn(B, G, H, Dk, gen=gen), dim=-1).to(dtype)
    v = randn(B, G, H, Dv, dtype=dtype, gen=gen)
    g = -F.softplus(randn(B, G, H, gen=gen)) / 4  # log decay <= 0
    beta = torch.sigmoid(randn(B, G, H, gen=gen))
    state = randn(B, H, Dk, Dv, dtype=sdtype, gen=gen)
    return q, k, v, g, beta, state, 1 / math.sqrt(Dk)


def _delta64(q, k, v, g, beta, h, scale, later_only=False):
    """The gated delta rule in fp64, one token at a time, in its matrix form
    h_t = (I - beta_t k_t k_tᵀ) exp(g_t) h_{t-1} + beta_t k_t v_tᵀ;  o_t = scale q_tᵀ h_t
    (`later_only`: o_t = scale q_tᵀ exp(g_t) h_{t-1}, the state before token t's write).
    Written here, apart from the reference. Returns o [B, G, H, Dv] and the last h."""
    q, k, v, g, beta, h = (x.double() for x in (q, k, v, g, beta, h))
    eye = torch.eye(k.shape[-1], dtype=torch.float64)
    outs = []
    for t in range(q.shape[1]):
        kt, bt, at = k[:, t], beta[:, t, :, None, None], torch.exp(g[:, t])[..., None, None]
        seen = at * h
        h = (eye - bt * kt[..., :, None] * kt[..., None, :]) @ seen
        h = h + bt * kt[..., :, None] * v[:, t, :, None, :]
        outs.append((scale * q[:, t, :, None, :] @ (seen if later_only else h)).squeeze(-2))
    return torch.stack(outs, 1), h


def _bidirectional64(q, k, v, g, beta, state, scale):
    """Forward from the state with token t written, plus the later tokens of the block as
    token t sees them (reversed scan from zero, read before t's write)."""
    fwd, h = _delta64(q, k, v, g, beta, state, scale)
    flip = [x.flip(1) for x in (q, k, v, g, beta)]
    bwd, _ = _delta64(*flip, torch.zeros_like(state, dtype=torch.float64), scale,
                      later_only=True)
    return fwd + bwd.flip(1), h


_check = partial(kc.check_block, gd.gated_delta_block, gated_delta_block_ref, 5)


@pytest.mark.parametrize("case", CASES, ids=kc.key_value_id)
@pytest.mark.parametrize("writes", kc.WRITES)
def test_gated_delta_matches_the_reference(case, writes):
    _check(_inputs(*case), writes, case[5], case[6])


@pytest.mark.parametrize("case", [(2, 5, 2, 20, 70), (1, 9, 3, 16, 8)], ids=str)
def test_reference_matches_an_fp64_recurrence(case):
    """The spec itself, against the delta rule written independently in fp64."""
    q, k, v, g, beta, state, scale = _inputs(*case, F32, F32, seed=2)
    want, h = _bidirectional64(q, k, v, g, beta, state, scale)
    new = torch.empty_like(state)
    ref = gated_delta_block_ref(q, k, v, g, beta, state, scale, new)
    assert_close(ref, want.float(), F32)
    assert_close(new, h.float(), F32, "new state")


def test_one_token_is_the_causal_gated_delta_rule():
    """G = 1: the backward direction sees nothing; one causal step remains."""
    q, k, v, g, beta, state, scale = _inputs(2, 1, 3, 20, 24, F32, F32, seed=3)
    a = torch.exp(g[:, 0]).double()[..., None, None]
    b = beta[:, 0].double()[..., None]
    k0, h0 = k[:, 0].double(), state.double()
    pred = torch.einsum("bhk,bhkv->bhv", k0, a * h0)
    h1 = a * h0 + k0[..., :, None] * (b * (v[:, 0].double() - pred))[..., None, :]
    want = torch.einsum("bhk,bhkv->bhv", scale * q[:, 0].double(), h1)[:, None]
    new = nan_like(state)
    out = gd.gated_delta_block(q, k, v, g, beta, state, scale, new)
    assert_close(out, want.float(), F32)
    assert_close(new, h1.float(), F32, "new state")


def test_long_block_beyond_a_register_tile():
    """G = 130 (past _common.MAX_G): the forward outputs wait in scratch, not in registers."""
    _check(_inputs(1, 130, 1, 16, 8, F32, F32, seed=4))


def test_strided_inputs():
    """q, k, v as views into one packed projection, g and beta non-contiguous."""
    B, G, H, Dk, Dv = 1, 4, 2, 16, 24
    gen = torch.Generator().manual_seed(5)
    qkv = randn(B, G, H, 2 * Dk + Dv, gen=gen)
    q, k, v = qkv.split([Dk, Dk, Dv], dim=-1)
    k = k / k.norm(dim=-1, keepdim=True)
    gb = randn(B, G, 2, H, gen=gen)
    g, beta = (-F.softplus(gb) / 4)[:, :, 0], torch.sigmoid(gb)[:, :, 1]
    state = randn(B, H, Dv, Dk, gen=gen).transpose(-1, -2)
    args = (q, k, v, g, beta, state, 0.25)
    assert not any(x.is_contiguous() for x in (q, v, g, beta, state))
    _check(args, "step")


@pytest.mark.parametrize("width", [8, 64])
def test_other_widths_stay_exact(width):
    with _common.tuned(gd, block_v=width):
        assert gd.block_v(1, 2, 70, 4, 20) == width
        _check(_inputs(1, 5, 2, 20, 70, F32, F32, seed=6))


def test_block_v_fills_the_gpu():
    assert gd.block_v(1, 20, 128, 132, 128) == 8  # 320 programs rather than 80
    assert gd.block_v(8, 20, 128, 132, 128) == 32
    assert gd.block_v(1, 1, 6, 132, 128) == 8  # never below 8 by the heuristic
    assert gd.block_v(1, 1, 4, 132, 128) == 4  # nor above the value dimension
    assert gd.block_v(8, 20, 128, 132, 1024) == 8  # a [1024, 8] fp32 state tile at most


def test_refuses_bad_shapes():
    q, k, v, g, beta, state, scale = _inputs(1, 2, 2, 16, 16, F32, F32)
    with pytest.raises(KernelError, match="beta"):
        gd.gated_delta_block(q, k, v, g, beta[:, :1], state, scale)
    with pytest.raises(KernelError, match="state"):
        gd.gated_delta_block(q, k, v, g, beta, state[..., :8], scale)
    with pytest.raises(KernelError, match="dtype"):
        gd.gated_delta_block(q, k, v, g.double(), beta, state, scale)
