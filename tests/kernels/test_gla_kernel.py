import math

import pytest
import torch
import torch.nn.functional as F
from fsc.kernels import _common
from fsc.kernels.gla import triton as gla
from fsc.kernels.gla.reference import gla_block_ref
from kernel_checks import assert_close, check_fold, check_step, dname, nan_like, randn

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16

# (B, G, H, Dk, Dv, dtype, state dtype)
CASES = [
    (2, 1, 3, 16, 16, F32, F32),
    (2, 5, 2, 20, 70, F32, F32),      # Dk padded, three Dv tiles
    (1, 8, 2, 32, 16, F32, F32),
    (2, 4, 2, 16, 32, BF16, F32),
    (1, 3, 2, 16, 16, F16, F32),
    (1, 4, 2, 16, 16, F32, BF16),
    (1, 40, 2, 16, 16, F32, F32),     # chunk form: three sub-chunks, the last partial
    (1, 64, 1, 32, 32, F32, F32),     # the longest block the chunk form takes
    (2, 33, 2, 20, 24, BF16, F32),    # chunk form, padded dims, bf16
    (1, 80, 1, 16, 16, F32, F32),     # five sub-chunks
]


def _inputs(B, G, H, Dk, Dv, dtype, sdtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q, k = randn(B, G, H, Dk, dtype=dtype, gen=gen), randn(B, G, H, Dk, dtype=dtype, gen=gen)
    v = randn(B, G, H, Dv, dtype=dtype, gen=gen)
    gk = F.logsigmoid(randn(B, G, H, Dk, gen=gen, scale=2.0)) / 4  # the mixer's fp32 gates
    state = randn(B, H, Dk, Dv, dtype=sdtype, gen=gen)
    return q, k, v, gk, state, 1 / math.sqrt(Dk)


def _id(c):
    return f"B{c[0]}G{c[1]}H{c[2]}Dk{c[3]}Dv{c[4]}-{dname(c[5])}-state_{dname(c[6])}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_gla_step_leaves_state_and_matches(case):
    check_step(gla.gla_block, gla_block_ref, _inputs(*case), 4, case[5])


@pytest.mark.parametrize("case", CASES, ids=_id)
@pytest.mark.parametrize("alias", [True, False], ids=["fold-in-place", "separate"])
def test_gla_fold_writes_new_state(case, alias):
    check_fold(gla.gla_block, gla_block_ref, _inputs(*case), 4, alias, case[5], case[6])


@pytest.mark.parametrize("kind", ["chunk", "scan"])
def test_both_forms_on_long_blocks(kind):
    """Either form, forced, over several sub-chunks, as a fold."""
    args = _inputs(2, 37, 2, 32, 32, F32, F32, seed=3)
    want = torch.empty_like(args[4])
    ref = gla_block_ref(*args, want)
    new = nan_like(args[4])
    with _common.tuned(gla, form=kind):
        assert gla.form(37, 32) == kind
        out = gla.gla_block(*args, new)
    assert_close(out, ref, F32)
    assert_close(new, want, F32, "new state")


def test_chunk_form_survives_gates_that_overflow_a_factorisation():
    """Gates summing to about -2000 over a block: e^{-b_s} alone would overflow fp32. Every
    exponential in the chunk form is split where both factors are <= 1, so it stays exact."""
    q, k, v, gk, state, scale = _inputs(1, 48, 2, 16, 16, F32, F32, seed=4)
    gk = -40.0 * torch.rand(gk.shape, generator=torch.Generator().manual_seed(5))
    gk[..., ::3] = -1e-3  # some dimensions hardly decay
    want = torch.empty_like(state)
    ref = gla_block_ref(q, k, v, gk, state, scale, want)
    new = nan_like(state)
    assert gla.form(48, 16) == "chunk"
    out = gla.gla_block(q, k, v, gk, state, scale, new)
    assert torch.isfinite(out).all() and torch.isfinite(new).all()
    assert_close(out, ref, F32)
    assert_close(new, want, F32, "new state")
