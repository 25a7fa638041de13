"""Random inputs of one block for the GPU check and `fsc verify --backend triton`
(see fsc/kernels/points.py for the shapes `sh` and `rnd`)."""

import torch


def inputs(B, sh, rnd):
    """(args, call, indices of the states a fold rewrites, output elements)."""
    G, H, P, N = sh["G"], sh["m_heads"], sh["m_head_dim"], sh["d_state"]
    args = (rnd(B, G, H, P), rnd(B, G, H), rnd(H, dt="fp32", scale=0.5) - 4.0,
            -torch.exp(rnd(H, dt="fp32")), rnd(B, G, N), rnd(B, G, N), rnd(H, dt="fp32"),
            rnd(B, G, H, P), rnd(B, H, P, N, dt="fp32", scale=0.5))
    return args, None, (8,), B * G * H * P
