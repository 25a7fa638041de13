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


def load_model(ref: str | Path, device="cpu", seed: int = 0, dtype=None, budget: int | None = None):
    """(recipe, model): a checkpoint's verified weights, or seeded initial weights of a recipe.

    Before anything is allocated, WeightsDoNotFit when the weights (in `dtype`, default the
    recipe's) exceed `budget` bytes (default: the device's free memory).
    """
    from fsc.costmodel import memory
    from fsc.errors import WeightsDoNotFit
    from fsc.model.layers import DTYPE_NAMES

    recipe = load_source_recipe(ref)
    need = memory(recipe.with_dtype(DTYPE_NAMES[dtype]) if dtype else recipe, 0, 1, 1)["weight_bytes"]
    budget = free_bytes(device) if budget is None else budget
    if need > budget:
        raise WeightsDoNotFit(f"{recipe.name}: its weights need {need} bytes ({need / 2**30:.1f} GiB) "
                              f"but {device} has {budget} bytes ({budget / 2**30:.1f} GiB) free; "
                              "try `fsc build` or `fsc estimate` instead")
    if is_checkpoint(ref):
        from fsc.hub.checkpoint import load_checkpoint

        recipe, model = load_checkpoint(Path(ref), device=device, dtype=dtype)
        return recipe, model
    from fsc.model.lm import build_model

    return recipe, build_model(recipe, device=device, seed=seed, dtype=dtype).eval()
