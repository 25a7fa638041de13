"""The block settings every command shares: mode, block size G and denoising steps K.

One rule, one place: `fsc decode`, `fsc profile` and `fsc estimate` resolve and check (mode, G,
K) here, so a setting one command refuses no other accepts. Pure Python (no torch), so the CLI
checks it before importing anything heavy.
"""

from __future__ import annotations

from fsc.errors import UsageError

MODES = ("diffusion", "ar")
POLICIES = ("confidence", "random", "margin", "entropy")  # reveal orders (fsc.decode.sampler)
# the least sampling temperature above 0 (greedy): logits divided by less leave a float's range,
# and the softmax is NaN (vLLM's floor too)
MIN_TEMPERATURE = 1e-5


def check_temperature(t: float, option: str = "--temperature") -> None:
    """UsageError for a sampling temperature between 0 (greedy) and MIN_TEMPERATURE."""
    if 0 < t < MIN_TEMPERATURE:
        raise UsageError(f"{option} {t!r}: give 0 (greedy) or at least {MIN_TEMPERATURE:g}; the "
                         "logits divided by a smaller one leave the range of a float")
MAX_G = 4096  # the recipe schema's bound on block_size
# Bounds of a decoding point that no real run reaches (16M tokens of context, 4096 sequences):
# they turn typos like `--B 1000000000` into a one-line error instead of a long computation.
MAX_S = 2**24
MAX_B = 4096
# the S and B `fsc profile` sweeps when given none (fsc.sweep.default_sweep), here so that its
# help names them without loading the sweep's recipe schema
CPU_DEFAULT_S = [1024, 4096, 16384, 65536]
CPU_DEFAULT_B = [1, 4]
GPU_DEFAULT_S = [1024, 4096, 16384, 65536, 262144]
GPU_DEFAULT_B = [1, 2, 4, 8]


def blocks_of(T: int, G: int) -> list[int]:
    """The block lengths of T tokens laid in blocks of G from the start, the last one shorter."""
    return [G] * (T // G) + ([T % G] if T % G else [])


def block_setting(mode: str | None, G: int | None, K: int | None,
                  recipe_G: int | None = None) -> tuple[str, int, int]:
    """(mode, G, K) from what a user gave, with the defaults filled in.

    Autoregressive decoding is G 1 and K 0 (one forward per token that folds it and predicts
    the next): giving --G or --steps with ar mode is an error, not silently ignored. Diffusion
    takes G from the recipe unless given, and K = G unless given; 1 <= K <= G, since every
    step reveals at least one masked position.
    """
    if mode is not None and mode not in MODES:
        raise UsageError(f"--mode {mode!r} is not one of {', '.join(MODES)}")
    given = mode
    mode = mode or ("ar" if recipe_G == 1 and G is None else "diffusion")
    if mode == "ar":
        if given is None and K is not None:  # --steps alone, on a recipe of G 1
            raise UsageError(f"--steps {K}: a model of block size 1 decodes autoregressively "
                             "unless told otherwise, with no denoising steps; drop --steps, or "
                             f"give --G N (at least {K}) to decode in blocks of N")
        given_too = [f"--G {G}"] * (G not in (None, 1)) + [f"--steps {K}"] * (K is not None)
        if given_too:
            raise UsageError("--mode ar decodes with G 1 and no denoising steps; drop "
                             + " and ".join(given_too))
        return "ar", 1, 0
    g = G if G is not None else recipe_G
    if g is None:
        raise UsageError("diffusion needs a block size: give --G")
    check_block(g, g if K is None else K)
    return "diffusion", g, g if K is None else K


def check_block(G: int, K: int) -> None:
    """UsageError unless 1 <= G <= MAX_G and 1 <= K <= G."""
    if G < 1:
        raise UsageError(f"--G {G} must be at least 1")
    if G > MAX_G:
        raise UsageError(f"--G {G} must be at most {MAX_G}")
    if not 1 <= K <= G:
        raise UsageError(f"--steps {K} must be between 1 and G = {G} (each step reveals at "
                         "least one of the block's G positions)")


def parse_ids(text: str, vocab_size: int, option: str) -> list[int]:
    """Token ids from "1,2,3" (spaces allowed), each in 0..vocab_size-1; at least one. ASCII
    digits only: str.isdigit() takes '²', which int() refuses, and int() reads other scripts'
    digits ('١' as 1)."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or not all(p.isascii() and p.isdigit() for p in parts):
        raise UsageError(f"{option} {text!r}: expected comma-separated token ids, e.g. 1,2,3")
    ids = [int(p) for p in parts]
    bad = next((i for i in ids if i >= vocab_size), None)
    if bad is not None:
        raise UsageError(f"{option}: token id {bad} is outside the vocabulary 0..{vocab_size - 1}")
    return ids
