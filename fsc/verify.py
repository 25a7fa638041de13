"""The exactness check: cached decoding equals the uncached block-causal forward.

For the whole model (logits) and for one mixer of each kind (outputs on random inputs), over
several blocks, B > 1, G > 1, in fp32. A recipe too large for this machine is checked with the
same layer plan at a reduced width.
"""

from __future__ import annotations

import torch

from fsc.costmodel import param_counts
from fsc.model.layers import TORCH_DTYPES
from fsc.model.lm import build_model
from fsc.recipe import Recipe

LOGIT_TOL = 1e-5  # absolute, on fp32 logits
MIXER_TOL = 1e-5  # relative to the largest output magnitude, on random inputs
MAX_FP32_WEIGHT_BYTES = 512 * 2**20
REDUCED_WIDTH = 256


def _reduce(recipe: Recipe) -> tuple[Recipe, bool]:
    if param_counts(recipe)["total"] * 4 <= MAX_FP32_WEIGHT_BYTES:
        return recipe, False
    return recipe.with_width(REDUCED_WIDTH, vocab_size=min(recipe.vocab_size, 1024)), True


@torch.no_grad()
def verify(recipe: Recipe, G: int | None = None, B: int = 2, n_blocks: int = 3,
           seed: int = 0, device="cpu", checkpoint=None) -> dict:
    """The exactness report. With `checkpoint` (a directory) its verified weights are used,
    upcast to fp32, unless the recipe has to be checked at a reduced width."""
    G = G or (recipe.block_size if recipe.block_size > 1 else 4)
    checked, reduced = _reduce(recipe)
    fp32 = TORCH_DTYPES["fp32"]
    model = build_model(checked, device=device, seed=seed, dtype=fp32, state_dtype=fp32).eval()
    weights = "seeded"
    if checkpoint is not None and not reduced:
        from fsc.hub.checkpoint import load_checkpoint

        _, trained = load_checkpoint(checkpoint, device=device, dtype=fp32)
        model.load_state_dict(trained.state_dict())
        weights = f"checkpoint {checkpoint}"
    gen = torch.Generator().manual_seed(seed)
    T = G * n_blocks
    checks = []

    tokens = torch.randint(0, checked.vocab_size, (B, T), generator=gen).to(device)
    ref = model.forward_blockwise(tokens, [G] * n_blocks)
    cache = model.empty_cache(B, T, device, block_size=G)
    err = fold_err = 0.0
    for b in range(n_blocks):
        blk = tokens[:, b * G : (b + 1) * G]
        step = model(blk, cache)
        fold = model.fold(blk, cache)
        err = max(err, (step - ref[:, b * G : (b + 1) * G]).abs().max().item())
        fold_err = max(fold_err, (fold - step).abs().max().item())
    checks.append({"what": "model logits", "kind": "model", "max_abs_err": max(err, fold_err),
                   "scale": ref.abs().max().item(), "tol": LOGIT_TOL,
                   "exact": max(err, fold_err) <= LOGIT_TOL})

    for kind in dict.fromkeys(checked.layer_plan):
        mixer = next(layer.mixer for layer in model.layers if layer.mixer.kind == kind)
        x = torch.randn(B, T, checked.d_model, generator=gen).to(device)
        ref = mixer.forward_blockwise(x, [G] * n_blocks)
        cache = mixer.empty_cache(B, T, device)
        worst = 0.0
        for b in range(n_blocks):
            sl = slice(b * G, (b + 1) * G)
            step = mixer(x[:, sl], cache)
            again = mixer(x[:, sl], cache)  # forward must not have touched the cache
            fold = mixer.fold(x[:, sl], cache)
            worst = max(worst, *((o - ref[:, sl]).abs().max().item() for o in (step, again, fold)))
        scale = max(ref.abs().max().item(), 1e-30)
        checks.append({"what": f"{kind} mixer", "kind": kind, "max_abs_err": worst, "scale": scale,
                       "tol": MIXER_TOL * scale, "exact": worst <= MIXER_TOL * scale})

    return {
        "recipe": recipe.name,
        "checked": checked.name,
        "reduced_width": reduced,
        "weights": weights,
        "d_model": checked.d_model,
        "G": G, "B": B, "blocks": n_blocks, "dtype": "fp32",
        "exact": all(c["exact"] for c in checks),
        "max_abs_err": {c["kind"]: c["max_abs_err"] for c in checks},
        "checks": checks,
    }
