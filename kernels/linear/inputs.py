"""Random inputs of one block for the GPU check and `fsc verify --backend triton`
(see fsc/kernels/points.py for the shapes `sh` and `rnd`)."""


def inputs(B, sh, rnd):
    """(args, call, indices of the states a fold rewrites, output elements)."""
    G, H, D = sh["G"], sh["heads"], sh["head_dim"]
    z = rnd(B, H, D, dt="fp32").abs() * 100 + 1  # a normaliser well above eps
    args = (rnd(B, G, H, D), rnd(B, G, H, D), rnd(B, G, H, D), rnd(B, H, D, D, dt="fp32"), z)
    return args, lambda f, a, new: f(*a, "elu1", 1e-6, *new), (3, 4), B * G * H * D
