"""Random inputs of one block for the GPU check and `fsc verify --backend triton`
(see fsc/kernels/points.py for the shapes `sh` and `rnd`)."""

import math

import torch.nn.functional as F


def inputs(B, sh, rnd):
    """(args, call, indices of the states a fold rewrites, output elements)."""
    G, H, D = sh["G"], sh["heads"], sh["head_dim"]
    args = (rnd(B, G, H, D), rnd(B, G, H, D), rnd(B, G, H, D),
            F.logsigmoid(rnd(B, G, H, D, dt="fp32")) / 16, rnd(B, H, D, D, dt="fp32", scale=0.5))
    return args, lambda f, a, new: f(*a, 1 / math.sqrt(D), *new), (4,), B * G * H * D
