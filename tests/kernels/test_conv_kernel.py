import pytest
import torch
from fsc.kernels.conv import triton as conv
from fsc.kernels.conv.reference import causal_conv_block_ref
from kernel_checks import BF16, F16, F32, assert_close, dname, nan_like, randn

# (B, G, C, W, x dtype, window dtype)
CASES = [
    (2, 1, 40, 4, F32, F32),     # G = 1: the new window keeps two old entries
    (2, 2, 70, 4, F32, F32),     # G < W - 1, channels across two tiles
    (1, 5, 16, 3, F32, F32),
    (2, 8, 48, 4, BF16, F32),    # bf16 activations, fp32 window (state_dtype)
    (1, 3, 24, 2, F16, F16),
]


def _inputs(B, G, C, W, dtype, wdtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return (randn(B, G, C, dtype=dtype, gen=gen), randn(B, C, W - 1, dtype=wdtype, gen=gen),
            randn(C, W, dtype=dtype, gen=gen, scale=0.5), randn(C, dtype=dtype, gen=gen, scale=0.1))


def _id(c):
    return f"B{c[0]}G{c[1]}C{c[2]}W{c[3]}-{dname(c[4])}-window_{dname(c[5])}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_conv_step_leaves_window_and_matches(case):
    x, win, w, b = _inputs(*case)
    win0 = win.clone()
    out = conv.causal_conv_block(x, win, w, b)
    assert torch.equal(win, win0)
    assert_close(out, causal_conv_block_ref(x, win, w, b), case[4])


@pytest.mark.parametrize("case", CASES, ids=_id)
@pytest.mark.parametrize("alias", [True, False], ids=["fold-in-place", "separate"])
def test_conv_fold_writes_new_window(case, alias):
    x, win, w, b = _inputs(*case)
    want_win = torch.empty_like(win)
    ref = causal_conv_block_ref(x, win, w, b, want_win)
    new = win if alias else nan_like(win)
    out = conv.causal_conv_block(x, win, w, b, new)
    assert_close(out, ref, case[4])
    assert torch.equal(new, want_win)  # a copy of inputs: exact


@pytest.mark.parametrize("case", CASES[:2] + CASES[3:4], ids=_id)
def test_conv_without_bias_is_the_conv_with_a_zero_bias(case):
    """bias None (Gated DeltaNet's conv): the kernel and the reference both leave it out."""
    x, win, w, _ = _inputs(*case)
    zero = torch.zeros(w.shape[0], dtype=w.dtype)
    want_win = torch.empty_like(win)
    ref = causal_conv_block_ref(x, win, w, zero, want_win)
    assert torch.equal(causal_conv_block_ref(x, win, w, None), ref)
    new = nan_like(win)
    assert_close(conv.causal_conv_block(x, win, w, None, new), ref, case[4])
    assert torch.equal(new, want_win)
