"""Random inputs of one block for the GPU check and `fsc verify --backend triton`
(see fsc/kernels/points.py for the shapes `sh` and `rnd`)."""

import math

import torch
import torch.nn.functional as F


def inputs(B, sh, rnd):
    """(args, call, indices of the states a fold rewrites, output elements). Keys and queries
    L2-normalised as the mixer gives them; Mamba-2-like decays, write strengths in (0, 1)."""
    G, H, D = sh["G"], sh["heads"], sh["head_dim"]
    q, k = (F.normalize(rnd(B, G, H, D, dt="fp32"), dim=-1).to(rnd(1).dtype) for _ in range(2))
    g = -F.softplus(rnd(B, G, H, dt="fp32")) / 8
    beta = torch.sigmoid(rnd(B, G, H, dt="fp32"))
    args = (q, k, rnd(B, G, H, D), g, beta, rnd(B, H, D, D, dt="fp32", scale=0.5))
    return args, lambda f, a, new: f(*a, 1 / math.sqrt(D), *new), (5,), B * G * H * D
