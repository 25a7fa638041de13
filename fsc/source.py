"""What a command was pointed at: a recipe (path or shipped name), a checkpoint directory, or
an import source (a published model's folder with config.json, or hf:ORG/NAME[@REV]), read
through its config as a recipe (fsc.imports).

Light (no torch): commands read the recipe and check their options with it before anything
heavy is imported. Building or loading the model is fsc.loading.
"""

from __future__ import annotations

import json
from pathlib import Path

from fsc.checkpoint.layout import CONFIG_FILE, RECIPE_FILE
from fsc.errors import CheckpointError
from fsc.imports import has_weights, import_config, is_import_source
from fsc.recipe import Recipe, load_recipe

LATEST = "latest"  # in a training directory: the name of its newest step directory


def resolve_checkpoint(path: str | Path) -> Path:
    """What a checkpoint argument names: a step directory as it is; a training directory's
    newest step (named by its `latest` file); that `latest` file itself, its step. Anything
    else is returned as it is (a recipe, an import source)."""
    p = Path(path)
    if p.name == LATEST and p.is_file():
        p = p.parent
    if (p / LATEST).is_file():
        name = (p / LATEST).read_text().strip()
        if "/" in name or not name.startswith("step-") or not (p / name).is_dir():
            raise CheckpointError(f"{p / LATEST}: names {name!r}, which is not a step "
                                  "directory here")
        return p / name
    return p


def resolved(ref: str) -> str:
    """`ref` with a training directory (or its `latest`) replaced by its newest step."""
    return ref if is_import_source(ref) else str(resolve_checkpoint(ref))


def is_checkpoint(ref: str | Path) -> bool:
    p = Path(ref)
    return p.is_dir() and (p / RECIPE_FILE).exists()


def load_source_recipe(ref: str | Path) -> Recipe:
    """The recipe of a recipe file, a shipped recipe name, a checkpoint directory or an import
    source (its config alone: the weights are not read)."""
    if is_import_source(ref):
        return import_config(ref).recipe
    return load_recipe(Path(ref) / RECIPE_FILE if is_checkpoint(ref) else ref)


def checkpoint_config(ref: str | Path) -> dict:
    """A checkpoint's config.json as a dict; empty for a recipe or an unreadable file."""
    if not is_checkpoint(ref):
        return {}
    try:
        config = json.loads((Path(ref) / CONFIG_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def checkpoint_tokenizer(ref: str | Path) -> Path | None:
    """A checkpoint's own tokenizer (an imported model's tokenizer.json), if it has one."""
    path = Path(ref) / "tokenizer.json"
    return path.parent if is_checkpoint(ref) and path.is_file() else None


def text_tokenizer(ref: str | Path) -> str | None:
    """The tokenizer a checkpoint reads text with: the one its training recorded (`fsc train
    --tokenizer`, or the one an adaptation wrote), else its own tokenizer.json (an imported
    model's); None: fsc's byte tokenizer."""
    trained = checkpoint_config(ref).get("training")
    spec = trained.get("tokenizer") if isinstance(trained, dict) else None
    own = checkpoint_tokenizer(ref)
    return spec or (str(own) if own is not None else None)


def has_published_weights(ref: str | Path) -> bool:
    """A local import source with its weights (an hf: source is read for its config alone:
    `fsc import` fetches the weights)."""
    return is_import_source(ref) and not str(ref).startswith("hf:") and has_weights(Path(ref))


def starts_with_bos(ref: str | Path) -> bool:
    """Whether the model's sequences begin with BOS, as its checkpoint's config.json says
    (`bos`). fsc trains without one, so a checkpoint written before the field existed, and a
    recipe's seeded weights, begin without BOS too."""
    return checkpoint_config(ref).get("bos") is True


def weights_origin(ref: str | Path, seed: int) -> str:
    """Where a model's weights come from, said plainly: seeded random weights are untrained."""
    if has_published_weights(ref):
        return f"published weights of {ref}"
    if not is_checkpoint(ref):
        return f"seeded random weights (seed {seed}, untrained)"
    config = checkpoint_config(ref)
    saved_seed = config.get("seed")
    if config.get("imported_from"):
        return f"checkpoint {ref}: published weights of {config['imported_from']}"
    if saved_seed is not None:
        return f"checkpoint {ref}: seeded random weights (seed {saved_seed}, untrained)"
    return f"checkpoint {ref}"
