import pytest
import torch
from fsc.kernels.linear import triton as lin
from fsc.kernels.linear.reference import linear_block_ref
from kernel_checks import BF16, F16, F32, assert_close, dname, nan_like, randn

from fsc.errors import KernelError

EPS = 1e-6

# (B, G, H, r, Dv, feature map, dtype, state dtype)
CASES = [
    (2, 1, 3, 16, 16, "elu1", F32, F32),
    (2, 5, 2, 20, 70, "elu1", F32, F32),      # r padded, three Dv tiles
    (1, 4, 2, 16, 40, "relu", F32, F32),
    (1, 3, 2, 16, 16, "identity", F32, F32),
    (2, 4, 2, 16, 32, "elu1", BF16, F32),
    (1, 3, 2, 32, 16, "relu", F16, F32),
    (2, 4, 2, 16, 48, "elu1", F32, BF16),     # bf16 state, two Dv tiles
]


def _inputs(B, G, H, r, Dv, fmap, dtype, sdtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if fmap == "identity":  # keep φ(q)·z away from the eps floor, where outputs are huge
        q, k = (torch.rand(B, G, H, r, generator=gen).to(dtype) for _ in range(2))
    else:
        q, k = randn(B, G, H, r, dtype=dtype, gen=gen), randn(B, G, H, r, dtype=dtype, gen=gen)
    v = randn(B, G, H, Dv, dtype=dtype, gen=gen)
    state = randn(B, H, r, Dv, dtype=sdtype, gen=gen)
    z = (torch.rand(B, H, r, generator=gen) + 0.5).to(sdtype)
    return q, k, v, state, z, fmap, EPS


def _id(c):
    return f"B{c[0]}G{c[1]}H{c[2]}r{c[3]}Dv{c[4]}-{c[5]}-{dname(c[6])}-state_{dname(c[7])}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_linear_step_leaves_state_and_matches(case):
    args = _inputs(*case)
    state0, z0 = args[3].clone(), args[4].clone()
    out = lin.linear_block(*args)
    assert torch.equal(args[3], state0) and torch.equal(args[4], z0)
    assert_close(out, linear_block_ref(*args), case[6])


@pytest.mark.parametrize("case", CASES, ids=_id)
@pytest.mark.parametrize("alias", [True, False], ids=["fold-in-place", "separate"])
def test_linear_fold_writes_new_state(case, alias):
    args = _inputs(*case)
    state, z = args[3], args[4]
    want_s, want_z = torch.empty_like(state), torch.empty_like(z)
    ref = linear_block_ref(*args, want_s, want_z)
    new_s, new_z = (state, z) if alias else (nan_like(state), nan_like(z))
    out = lin.linear_block(*args, new_s, new_z)
    assert_close(out, ref, case[6])
    assert_close(new_s, want_s, case[7], "new state")
    assert_close(new_z, want_z, case[7], "new z")


def test_linear_rejects_unknown_feature_map():
    args = list(_inputs(1, 2, 2, 16, 16, "elu1", F32, F32))
    args[5] = "softmax"
    with pytest.raises(KernelError, match="feature map"):
        lin.linear_block(*args)
