"""RoPE's shared cos/sin table gives the rotation computed directly, at any positions (a run
or scattered), and serves training after a decode built it under inference mode."""

import torch

from fsc.model.layers import rope


def test_the_table_rotates_as_computing_does():
    x = torch.randn(2, 5, 3, 8, generator=torch.Generator().manual_seed(0))
    pos = torch.tensor([0, 7, 300, 301, 2])
    direct = rope(x, pos, 777.0)
    torch.testing.assert_close(rope(x, pos, 777.0, upto=302), direct, atol=1e-6, rtol=1e-6)
    run = rope(x, range(40, 45), 777.0, upto=45)
    torch.testing.assert_close(run, rope(x, torch.arange(40, 45), 777.0), atol=1e-6, rtol=1e-6)


def test_a_table_built_in_inference_mode_serves_autograd():
    x = torch.randn(1, 4, 2, 6, requires_grad=True)
    with torch.inference_mode():
        rope(x.detach(), range(0, 4), 4321.0, upto=4)  # the first to ask builds the table
    rope(x, range(0, 4), 4321.0, upto=4).sum().backward()
    assert x.grad is not None
