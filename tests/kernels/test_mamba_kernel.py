import pytest
import torch
from fsc.kernels.mamba import triton as mamba
from fsc.kernels.mamba.reference import mamba_block_scan_ref
from kernel_checks import BF16, F16, F32, WRITES, assert_close, check_block, dname, randn, rel_err

from fsc.errors import KernelError

# (B, G, H, P, N, dtype, state dtype, with z)
CASES = [
    (2, 1, 3, 16, 8, F32, F32, True),     # the causal step
    (2, 5, 3, 20, 16, F32, F32, True),    # P not a power of two, N padded
    (1, 16, 2, 40, 32, F32, F32, False),  # two P tiles, no gate
    (2, 4, 2, 16, 16, BF16, F32, True),
    (1, 3, 2, 16, 16, F16, F32, True),
    (2, 4, 2, 16, 16, F32, BF16, True),   # bf16 state
]


def _inputs(B, G, H, P, N, dtype, sdtype, with_z, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = randn(B, G, H, P, dtype=dtype, gen=gen)
    dt = randn(B, G, H, dtype=dtype, gen=gen)
    dt_bias = randn(H, gen=gen, scale=0.5)
    A = -torch.exp(randn(H, gen=gen))
    Bm, Cm = randn(B, G, N, dtype=dtype, gen=gen), randn(B, G, N, dtype=dtype, gen=gen)
    D = randn(H, gen=gen)
    z = randn(B, G, H, P, dtype=dtype, gen=gen) if with_z else None
    state = randn(B, H, P, N, dtype=sdtype, gen=gen)
    return x, dt, dt_bias, A, Bm, Cm, D, z, state


def _id(c):
    return f"B{c[0]}G{c[1]}H{c[2]}P{c[3]}N{c[4]}-{dname(c[5])}-state_{dname(c[6])}" + ("" if c[7] else "-noz")


@pytest.mark.parametrize("case", CASES, ids=_id)
@pytest.mark.parametrize("writes", WRITES)
def test_mamba_matches_the_reference(case, writes):
    check_block(mamba.mamba_block_scan, mamba_block_scan_ref, -1, _inputs(*case), writes, case[5],
                case[6])


def test_mamba_reads_strided_views():
    """The mixer passes splits of one projection (x, z, B, C, dt are strided views)."""
    gen = torch.Generator().manual_seed(2)
    B, G, H, P, N = 2, 4, 2, 16, 8
    d_inner = H * P
    proj = randn(B, G, 2 * d_inner + 2 * N + H, gen=gen)
    z, x, Bm, Cm, dt = proj.split([d_inner, d_inner, N, N, H], dim=-1)
    x, z = x.reshape(B, G, H, P), z.reshape(B, G, H, P)
    rest = (randn(H, gen=gen), -torch.exp(randn(H, gen=gen)))
    state = randn(B, H, P, N, gen=gen)
    args = (x, dt, *rest, Bm, Cm, randn(H, gen=gen), z, state)
    assert_close(mamba.mamba_block_scan(*args), mamba_block_scan_ref(*args), F32)


def test_mamba_rejects_mismatched_state():
    args = list(_inputs(1, 2, 2, 16, 8, F32, F32, True))
    args[-1] = args[-1][:, :, :, :4]
    with pytest.raises(KernelError, match="state"):
        mamba.mamba_block_scan(*args)


def test_mamba_rejects_oversized_block():
    args = list(_inputs(1, 129, 1, 16, 8, F32, F32, False))
    with pytest.raises(KernelError, match="G = 129"):
        mamba.mamba_block_scan(*args)


# (A scale, raw dt scale, raw dt shift, state scale): decay moderate (block log-decay in the
# tens) to strong (in the thousands: every weight but the last token's underflows), step sizes
# mixing 1e-5 and 10, and a first block (zero state) at Mamba's usual step sizes of about 1e-3,
# where softplus as log(1 + e^v) loses digits.
DECAYS = {"moderate": (1.0, 1.0, 0.0, 1.0), "strong": (300.0, 1.0, 0.0, 1.0),
          "strong-mixed-dt": (30.0, 6.0, 0.0, 1.0), "small-dt-first-block": (1.0, 0.5, -7.0, 0.0)}


@pytest.mark.parametrize("decay", DECAYS)
def test_mamba_matches_fp64_under_decay(decay):
    """New state and outputs against the recurrence in fp64: fp32 rounding only (~1e-7). A total
    decay taken apart from the cumulative sum, weights formed as total − c_s, or softplus as
    log(1 + e^v) each miss by 1e-6 to 5e-4 here."""
    a_scale, dt_scale, dt_shift, state_scale = DECAYS[decay]
    B, G, H, P, N = 2, 16, 2, 16, 16
    gen = torch.Generator().manual_seed(3)
    x, Bm, Cm, z = (randn(*s, gen=gen) for s in ((B, G, H, P), (B, G, N), (B, G, N), (B, G, H, P)))
    dt = randn(B, G, H, gen=gen, scale=dt_scale) + dt_shift
    dt_bias, A, D = randn(H, gen=gen, scale=0.5), -torch.exp(randn(H, gen=gen)) * a_scale, randn(H, gen=gen)
    state = randn(B, H, P, N, gen=gen, scale=state_scale)
    args = (x, dt, dt_bias, A, Bm, Cm, D, z, state)
    new, want = torch.empty_like(state), torch.empty_like(state, dtype=torch.float64)
    out = mamba.mamba_block_scan(*args, new)
    ref = mamba_block_scan_ref(*(t.double() for t in args), want)
    assert rel_err(new, want) <= 4e-7, f"new state: {rel_err(new, want):.3g}"
    assert rel_err(out, ref) <= 4e-7, f"output: {rel_err(out, ref):.3g}"


@pytest.mark.parametrize("G", [1, 5])
def test_mamba_takes_a_rate_per_token(G):
    """A [B, G, H] (`mamba.decay_from`: each token's rate), also as the mixer passes it (one
    row's rates expanded over the batch), against the reference; and not the heads' rates."""
    B, H, P, N = 2, 3, 16, 8
    x, dt, dt_bias, A, Bm, Cm, D, z, state = _inputs(B, G, H, P, N, F32, F32, True, seed=4)
    scale = torch.linspace(0.9, 0.2, G)
    for rates in (A * scale[None, :, None] * torch.tensor([1.0, 0.5])[:, None, None],
                  (A * scale[:, None]).expand(B, G, H)):
        args = (x, dt, dt_bias, rates, Bm, Cm, D, z, state)
        new, want = torch.empty_like(state), torch.empty_like(state)
        out = mamba.mamba_block_scan(*args, new)
        assert_close(out, mamba_block_scan_ref(*args, want), F32)
        assert_close(new, want, F32)
        plain = torch.empty_like(state)  # the state the heads' rates leave
        mamba_block_scan_ref(x, dt, dt_bias, A, Bm, Cm, D, z, state, plain)
        assert (new - plain).abs().max() > 1e-3
    with pytest.raises(KernelError, match="A has shape"):
        mamba.mamba_block_scan(x, dt, dt_bias, A[None, None].expand(B, G + 1, H), Bm, Cm, D, z, state)
