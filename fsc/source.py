"""What a command was pointed at: a recipe (path or shipped name) or a checkpoint directory."""

from __future__ import annotations

from pathlib import Path

from fsc.recipe import Recipe, load_recipe

CHECKPOINT_RECIPE = "fsc_recipe.yaml"


def is_checkpoint(ref: str | Path) -> bool:
    p = Path(ref)
    return p.is_dir() and (p / CHECKPOINT_RECIPE).exists()


def load_source_recipe(ref: str | Path) -> Recipe:
    """The recipe of a recipe file, a shipped recipe name or a checkpoint directory."""
    return load_recipe(Path(ref) / CHECKPOINT_RECIPE if is_checkpoint(ref) else ref)


def load_model(ref: str | Path, device="cpu", seed: int = 0, dtype=None):
    """(recipe, model): a checkpoint's verified weights, or seeded initial weights of a recipe."""
    if is_checkpoint(ref):
        from fsc.hub.checkpoint import load_checkpoint

        recipe, model = load_checkpoint(Path(ref), device=device, dtype=dtype)
        return recipe, model
    from fsc.model.lm import build_model

    recipe = load_recipe(ref)
    return recipe, build_model(recipe, device=device, seed=seed, dtype=dtype).eval()
