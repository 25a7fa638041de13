"""What a command was pointed at: a recipe (path or shipped name) or a checkpoint directory.

Above the model and the hub (it builds models and reads checkpoints), below the commands.
"""

from __future__ import annotations

from pathlib import Path

from fsc.hub.layout import CONFIG_FILE, RECIPE_FILE
from fsc.recipe import Recipe, load_recipe


def is_checkpoint(ref: str | Path) -> bool:
    p = Path(ref)
    return p.is_dir() and (p / RECIPE_FILE).exists()


def load_source_recipe(ref: str | Path) -> Recipe:
    """The recipe of a recipe file, a shipped recipe name or a checkpoint directory."""
    return load_recipe(Path(ref) / RECIPE_FILE if is_checkpoint(ref) else ref)


def weights_origin(ref: str | Path, seed: int) -> str:
    """Where a model's weights come from, said plainly: seeded random weights are untrained."""
    if not is_checkpoint(ref):
        return f"seeded random weights (seed {seed}, untrained)"
    import json

    try:
        saved_seed = json.loads((Path(ref) / CONFIG_FILE).read_text()).get("seed")
    except (OSError, ValueError, AttributeError):
        saved_seed = None
    if saved_seed is not None:
        return f"checkpoint {ref}: seeded random weights (seed {saved_seed}, untrained)"
    return f"checkpoint {ref}"


def free_bytes(device) -> int:
    """Memory new tensors may take: free device memory, or MemAvailable on the CPU."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 2**63


def check_fits(recipe: Recipe, device, S: int = 0, B: int = 1, G: int = 1,
               budget: int | None = None) -> None:
    """WeightsDoNotFit, before anything is allocated, when the cost model's weights + cache (room
    for S + G tokens at batch B) + activations of one pass exceed `budget` bytes (default: the
    device's free memory). The message says what is needed and what is available."""
    from fsc.costmodel import memory
    from fsc.errors import WeightsDoNotFit

    mem = memory(recipe, S, B, G)
    budget = free_bytes(device) if budget is None else budget
    need, weights = mem["total_bytes"], mem["weight_bytes"]
    if need <= budget:
        return
    have = f"{device} has {budget} bytes ({budget / 2**30:.1f} GiB) free"
    if weights > budget:
        raise WeightsDoNotFit(f"{recipe.name}: its weights need {weights} bytes "
                              f"({weights / 2**30:.1f} GiB) but {have}; "
                              "try `fsc build` or `fsc estimate` instead")
    raise WeightsDoNotFit(
        f"{recipe.name}: needs {need / 2**30:.2f} GiB at S {S}, B {B}, G {G} (weights "
        f"{weights / 2**30:.2f}, cache {mem['cache_capacity_bytes'] / 2**30:.2f}, activations "
        f"{mem['activation_bytes'] / 2**30:.2f} GiB) but {have}"
    )


def load_model(ref: str | Path, device="cpu", seed: int = 0, dtype=None, budget: int | None = None,
               S: int = 0, B: int = 1, G: int = 1):
    """(recipe, model): a checkpoint's verified weights, or seeded initial weights of a recipe.

    Before anything is allocated, `check_fits` for a pass at (S, B, G) in `dtype` (default the
    recipe's) against `budget` bytes (default: the device's free memory).
    """
    from fsc.model.layers import DTYPE_NAMES

    recipe = load_source_recipe(ref)
    check_fits(recipe.with_dtype(DTYPE_NAMES[dtype]) if dtype else recipe, device, S, B, G, budget)
    if is_checkpoint(ref):
        from fsc.hub.checkpoint import load_checkpoint

        recipe, model = load_checkpoint(Path(ref), device=device, dtype=dtype)
        return recipe, model
    from fsc.model.lm import build_model

    return recipe, build_model(recipe, device=device, seed=seed, dtype=dtype).eval()
