"""The GLA chunk kernel's new state under strong gates, against the recurrence in fp64."""

import torch
from fsc.kernels.gla import triton as gla
from kernel_checks import randn, rel_err


def test_gla_new_state_matches_fp64_under_strong_gates():
    """Gates of hundreds per token, the last two of each sub-chunk a few tenths: a token's weight
    taken as exp(total − its running sum) is off by an ulp of the total (9e-5 relative in the
    state here); summed from the later gates alone it is fp32 rounding (~1e-7)."""
    B, G, H, Dk, Dv = 1, 24, 2, 16, 16  # a full sub-chunk of 16 and a partial one
    gen = torch.Generator().manual_seed(0)
    q, k, v = randn(B, G, H, Dk, gen=gen), randn(B, G, H, Dk, gen=gen), randn(B, G, H, Dv, gen=gen)
    gk = -torch.rand(B, G, H, Dk, generator=gen) * 700
    gk[:, [14, 15, 22, 23]] /= 1000  # the last two tokens of each sub-chunk decay little
    state = randn(B, H, Dk, Dv, gen=gen)
    assert gla.form(G, Dk) == "chunk"
    new = torch.empty_like(state)
    gla.gla_block(q, k, v, gk, state, 0.25, new)
    h = state.double()
    for t in range(G):
        h = torch.exp(gk[:, t].double())[..., None] * h + k[:, t, ..., None].double() * v[:, t, :, None, :].double()
    assert rel_err(new, h) <= 4e-7, f"new state: {rel_err(new, h):.3g}"
