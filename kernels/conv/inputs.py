"""Random inputs of one block for the GPU check and `fsc verify --backend triton`
(see fsc/kernels/points.py for the shapes `sh` and `rnd`)."""


def inputs(B, sh, rnd):
    """(args, call, indices of the states a fold rewrites, output elements)."""
    G, C, W = sh["G"], sh["conv_dim"], sh["d_conv"]
    args = (rnd(B, G, C), rnd(B, C, W - 1, dt="fp32"), rnd(C, W, scale=0.5), rnd(C, scale=0.1))
    return args, None, (1,), B * G * C
