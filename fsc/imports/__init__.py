"""Published architectures: a Hugging Face config.json (and its weights) as an fsc recipe.

An import source is a local folder holding config.json (and, where present, *.safetensors and
tokenizer files) that is not an fsc checkpoint, or ``hf:ORG/NAME[@REV]`` on the Hub. Each
family (one module here) turns a config into recipe fields and names, for every tensor of
fsc's model, the published tensor that fills it. A feature fsc cannot express is refused with
one line naming it (`ImportRefused`); nothing is approximated. Torch-free: the cost model needs
only the config; fsc.imports.convert reads the weights.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from fsc.checkpoint.layout import INDEX_FILE, RECIPE_FILE
from fsc.errors import ImportRefused, RecipeError
from fsc.imports import bamba, llama, mamba2, mamba_ssm, qwen3_next
from fsc.imports.config import Config, recipe_name
from fsc.imports.fetch import PICKLED, PICKLED_INDEX, holds_weights, snapshot
from fsc.jsonsafe import json_object
from fsc.recipe import PUBLISHED, Recipe, parse_recipe, published_recipes

HF_PREFIX = "hf:"
CONFIG = "config.json"
FAMILIES: dict[str, ModuleType] = {
    arch: m for m in (llama, mamba2, mamba_ssm, bamba, qwen3_next) for arch in m.ARCHITECTURES}


def is_import_source(ref: str | Path) -> bool:
    """`hf:ORG/NAME[@REV]`, or a folder with config.json that is not an fsc checkpoint."""
    if str(ref).startswith(HF_PREFIX):
        return True
    p = Path(ref)
    try:
        return p.is_dir() and (p / CONFIG).is_file() and not (p / RECIPE_FILE).exists()
    except (OSError, ValueError):
        return False


LENGTH_KEYS = ("n_positions", "max_position_embeddings", "n_ctx")  # transformers' order
UNSET_LENGTH = int(1e30)  # a tokenizer's model_max_length that says none (transformers')


def published_length(config, tokenizer_dir=None) -> int | None:
    """A published model's own length, as lm-evaluation-harness's hf model reads it: its
    config.json's (a path, or the dict) n_positions, max_position_embeddings or n_ctx (a
    multimodal config's text_config first), else its tokenizer's model_max_length (in
    `tokenizer_dir`); None where neither says."""
    data = config if isinstance(config, dict) else json_object(config)
    data = data.get("text_config") or data
    for key in LENGTH_KEYS:
        if isinstance(data.get(key), int):
            return data[key]
    length = (json_object(Path(tokenizer_dir) / "tokenizer_config.json")
              if tokenizer_dir else {}).get("model_max_length")
    return length if isinstance(length, int) and length != UNSET_LENGTH else None


def parse_hf(ref: str) -> tuple[str, str | None]:
    """(repo id, revision or None) of ``hf:ORG/NAME[@REV]``."""
    repo, at, rev = ref.removeprefix(HF_PREFIX).partition("@")
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ImportRefused(f"{ref}: not a Hub model id (expected hf:ORG/NAME or hf:ORG/NAME@REV)")
    if at and not rev.strip():
        raise ImportRefused(f"{ref}: no revision after @ (give hf:ORG/NAME@REV, or drop the @)")
    return repo, rev or None


@dataclass(frozen=True)
class Imported:
    """A config read as a recipe: the family module that maps its tensors, and the source."""

    recipe: Recipe
    family: ModuleType
    architecture: str
    source: str
    origin: str | None = None  # a config's own "_source" note (fsc's transcribed configs)

    def recipe_yaml(self) -> str:
        """The recipe as YAML, its first lines naming where it came from."""
        origin = f"# Source: {self.origin}\n" if self.origin else ""
        return (f"# Imported by `fsc import` from {self.source} ({self.architecture}).\n"
                f"{origin}"
                "# G = 1: the published causal LM; fsc's block-causal mixers reduce to it.\n"
                + self.recipe.to_yaml())


def read_config(directory: Path, source: str) -> Config:
    path = directory / CONFIG
    if (directory / RECIPE_FILE).exists():
        raise ImportRefused(f"{source}: an fsc checkpoint, not a published model; every fsc "
                            "command reads it as it is")
    if directory.exists() and not directory.is_dir():
        raise ImportRefused(f"{source}: not a folder; a published model is a folder with "
                            f"{CONFIG}, published/NAME or hf:ORG/NAME")
    if not directory.exists():
        raise ImportRefused(f"{source}: no such folder; a published model is a folder with "
                            f"{CONFIG}, published/NAME or hf:ORG/NAME")
    if not path.exists():
        raise ImportRefused(f"{source}: holds no {CONFIG}, so no published model (whose folder "
                            f"holds {CONFIG}, its weights and tokenizer)")
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ImportRefused(f"{source}: cannot read {CONFIG} ({e.strerror or e})") from None
    except ValueError as e:
        raise ImportRefused(f"{source}: {CONFIG} is not valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise ImportRefused(f"{source}: {CONFIG} is not a JSON object")
    if data.get("library_name") == "fsc":  # one `fsc push` sent to the Hub, where only the
        # config is fetched here (a local one without its recipe: fsc.source says so)
        then = (f": fetch it with fsc pull {source.removeprefix(HF_PREFIX)}, then give its "
                "directory" if source.startswith(HF_PREFIX) else f", without its {RECIPE_FILE}")
        raise ImportRefused(f"{source}: an fsc checkpoint (its {CONFIG} says library_name fsc), "
                            f"not a published model{then}")
    return Config(data, source)


def from_config(cfg: Config, name: str | None = None) -> Imported:
    """The recipe of a published config, or ImportRefused naming what fsc cannot express."""
    archs = cfg.get("architectures")
    if archs is not None and not (isinstance(archs, list)
                                  and all(isinstance(a, str) for a in archs)):
        raise ImportRefused(f"{cfg.source}: config.json: architectures must be a list of "
                            f"names (got {archs!r})")
    arch = cfg.architecture
    family = FAMILIES.get(arch)
    if family is None:
        raise ImportRefused(f"{cfg.source}: architecture {arch} is not supported; fsc imports "
                            + ", ".join(FAMILIES))
    quantized = cfg.get("quantization_config")
    if quantized:
        method = quantized.get("quant_method") if isinstance(quantized, dict) else None
        raise cfg.refuse(f"quantized weights (quantization_config {method or quantized!r})",
                         "fsc imports float32, bfloat16 or float16 weights")
    defaults = getattr(family, "DEFAULTS", {}).get(arch)
    if defaults:  # transformers' default of a key the config leaves out, where not fsc's
        cfg = Config({**defaults, **cfg.data}, cfg.source)
    try:
        data = family.recipe(cfg, name or recipe_name(cfg.source))
    except KeyError as e:
        raise ImportRefused(f"{cfg.source}: config.json: {arch} needs {e} "
                            "(nothing was imported)") from None
    except (TypeError, ValueError, ZeroDivisionError) as e:  # a value of the wrong kind
        raise ImportRefused(f"{cfg.source}: config.json: not a {arch} config fsc can read "
                            f"({type(e).__name__}: {e}); nothing was imported") from None
    try:
        recipe = parse_recipe(data, cfg.source)
    except RecipeError as e:
        raise ImportRefused(f"{e} (from {arch}'s config)") from None
    origin = cfg.data.get("_source")
    return Imported(recipe, family, arch, cfg.source, str(origin) if origin else None)


def has_weights(directory: Path) -> bool:
    """Whether a published folder holds weights fsc imports: *.safetensors, or (where it has
    none, as state-spaces ships Mamba-2) a pytorch_model.bin; or an index of either (whose
    shards fsc.imports.convert then requires). The one rule of `fsc import`, of the commands
    that load a folder directly, and of fsc.imports.convert."""
    return any(directory.glob("*.safetensors")) or any(
        (directory / f).is_file() for f in (INDEX_FILE, PICKLED, PICKLED_INDEX))


def source_has_weights(ref: str) -> bool:
    """`has_weights` of an import source; an hf: source is asked by its file list, so that
    what `fsc import` writes is known (and its --out checked) before the weights download."""
    if ref.startswith(HF_PREFIX):
        held = holds_weights(*parse_hf(ref))
        if held is not None:
            return held
    return has_weights(local_dir(ref, files="all"))


def local_dir(ref: str, files: str = "config") -> Path:
    """The folder of an import source: the folder itself; for ``published/NAME`` (a published
    model's recipe, as `fsc recipes` lists it) where no such folder is here, the folder its
    recipe was imported from, recipes/published/NAME; or a Hub snapshot of its config
    (`files="config"`) or of config, weights and tokenizer (`files="all"`)."""
    if ref.startswith(HF_PREFIX):
        repo, rev = parse_hf(ref)
        return snapshot(repo, rev, weights=files == "all")
    folder = Path(ref)
    if folder.parts[:1] != (PUBLISHED,) or os.path.exists(folder):
        return folder
    recipe = published_recipes().get(folder.as_posix())
    if recipe is None:
        raise ImportRefused(f"{ref}: no such folder, nor a published model of that name "
                            "(`fsc recipes` lists them)")
    return recipe.with_suffix("")  # NAME.yaml is what `fsc import` makes of NAME/config.json


def pinned(ref: str) -> str:
    """``hf:ORG/NAME@COMMIT``: an hf: source at the commit its config's snapshot holds, whatever
    branch or tag it named (read once), so that its config, file list, weights and tokenizer
    come from one commit however the branch moves meanwhile; any other source as it is."""
    if not ref.startswith(HF_PREFIX):
        return ref
    repo, rev = parse_hf(ref)
    if rev is not None and re.fullmatch(r"[0-9a-f]{40}", rev):  # pinned already: no second call
        return ref
    commit = snapshot(repo, rev, weights=False).name  # the cache's snapshots/COMMIT
    return f"{HF_PREFIX}{repo}@{commit}" if re.fullmatch(r"[0-9a-f]{40}", commit) else ref


def import_config(ref: str | Path, name: str | None = None) -> Imported:
    """The recipe of an import source, from its config alone."""
    return from_config(read_config(local_dir(str(ref)), str(ref)), name)
