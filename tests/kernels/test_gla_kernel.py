import math
from functools import partial

import kernel_checks as kc
import pytest
import torch
import torch.nn.functional as F
from fsc.kernels import _common
from fsc.kernels.gla import triton as gla
from fsc.kernels.gla.reference import gla_block_ref
from kernel_checks import BF16, F32, randn

CASES = kc.KEY_VALUE_CASES + [
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


_check = partial(kc.check_block, gla.gla_block, gla_block_ref, 4)


@pytest.mark.parametrize("case", CASES, ids=kc.key_value_id)
@pytest.mark.parametrize("writes", kc.WRITES)
def test_gla_matches_the_reference(case, writes):
    _check(_inputs(*case), writes, case[5], case[6])


@pytest.mark.parametrize("kind", ["chunk", pytest.param("scan", marks=pytest.mark.slow)])
def test_both_forms_on_long_blocks(kind):
    """Either form, forced, over several sub-chunks, as a fold."""
    with _common.tuned(gla, form=kind):
        assert gla.form(37, 32) == kind
        _check(_inputs(2, 37, 2, 32, 32, F32, F32, seed=3))


def test_chunk_form_survives_gates_that_overflow_a_factorisation():
    """Gates summing to about -2000 over a block: e^{-b_s} alone would overflow fp32. Every
    exponential in the chunk form is split where both factors are <= 1, so it stays exact."""
    q, k, v, gk, state, scale = _inputs(1, 48, 2, 16, 16, F32, F32, seed=4)
    gk = -40.0 * torch.rand(gk.shape, generator=torch.Generator().manual_seed(5))
    gk[..., ::3] = -1e-3  # some dimensions hardly decay
    assert gla.form(48, 16) == "chunk"
    _check((q, k, v, gk, state, scale))  # finite, and the reference's
