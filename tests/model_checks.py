"""Shared pieces of the model tests: a model whose mixers matter to the logits, and the
uncached block-causal reference that the cached path is walked against, block by block."""

from __future__ import annotations

import torch

from fsc.model.lm import build_model
from fsc.recipe import Recipe, load_recipe, shipped_recipes

# The tiny shipped recipes: together they hold every mixer kind.
EVERY_MIXER = sorted(n for n in shipped_recipes() if n.startswith("tiny_"))


def mixing_model(recipe: Recipe | str, scale: float = 5.0, seed: int = 3):
    """The model of `recipe` (or of a shipped recipe's name) in eval mode, its mixers' matrices
    × `scale`: larger weights make every mixer matter to the logits."""
    m = build_model(load_recipe(recipe) if isinstance(recipe, str) else recipe, seed=seed).eval()
    if scale != 1.0:
        with torch.no_grad():
            for layer in m.layers:
                for p in layer.mixer.parameters():
                    if p.ndim == 2:
                        p.mul_(scale)
    return m


def with_shift(name: str) -> Recipe:
    """The shipped recipe `name` with the logit shift (`Recipe.logit_shift`), validated."""
    fields = load_recipe(name).hashed_fields()
    return Recipe.model_validate({**fields, "logit_shift": True})


def blockwise(m, G: int, vocab: int, B: int = 2, nb: int = 3):
    """Random tokens (seeded by G) in `nb` blocks of G, their uncached block-causal logits, an
    empty cache for them and each block's slice of the tokens."""
    tokens = torch.randint(0, vocab, (B, G * nb), generator=torch.Generator().manual_seed(G))
    ref = m.forward_blockwise(tokens, [G] * nb)
    cache = m.empty_cache(B, G * nb, block_size=G)
    return tokens, ref, cache, [slice(b * G, (b + 1) * G) for b in range(nb)]


def passkey_batch(n: int, G: int):
    """A batch of the first `n` passkey samples (128 tokens, blocks of G), on the CPU: a task
    whose supervised positions are its answers."""
    from fsc.data.tasks import Passkey
    from fsc.objective import Batch
    from fsc.tokenizer import ByteTokenizer

    task = Passkey(ByteTokenizer(), 128, G, 5)
    return Batch.of([task.sample(i) for i in range(n)], "cpu")
