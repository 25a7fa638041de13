"""What a command was pointed at: a recipe (path or shipped name), a checkpoint directory, or
an import source (a published model's folder with config.json, or hf:ORG/NAME[@REV]), read
through its config as a recipe (fsc.imports). `Source.read` resolves it once into what every
command asks of it: the recipe, the checkpoint's config, the tokenizer its text is read with,
whether its sequences begin with BOS, and where its weights come from.

Light (no torch): commands read the recipe and check their options with it before anything
heavy is imported. Building or loading the model is fsc.loading.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import try_to_load_from_cache

import fsc
from fsc.checkpoint.layout import (
    CONFIG_FILE,
    RECIPE_FILE,
    check_tokenizer_listed,
    read_checksums,
    read_config,
    verify_checksums,
)
from fsc.errors import CheckpointError, ImportRefused, RecipeError, UsageError
from fsc.imports import (
    HF_PREFIX,
    has_weights,
    import_config,
    is_import_source,
    local_dir,
    parse_hf,
    published_length,
)
from fsc.jsonsafe import json_object
from fsc.paths import held
from fsc.recipe import Recipe, load_recipe
from fsc.text import printable
from fsc.tokenizer import IdTokenizer, load_tokenizer

LATEST = "latest"  # in a training directory: the name of its newest step directory
_FOLDER_FILES = (".safetensors", ".json", ".md", ".sha256", ".bin")  # never a recipe file


def resolve_checkpoint(path: str | Path, resume: bool = False) -> Path:
    """What a checkpoint argument names: a step directory as it is; a training directory's
    newest step (named by its `latest` file); that `latest` file itself, its step. Anything
    else is returned as it is (a recipe, an import source). `resume`: it was given as
    --resume, which a message names."""
    _named(path)
    p = Path(path)
    if p.name == LATEST and p.is_file():
        p = p.parent
    if (p / LATEST).is_file():
        name = (p / LATEST).read_text().strip()
        if "/" in name or not name.startswith("step-") or not (p / name).is_dir():
            raise CheckpointError(f"{p / LATEST}: names {name!r}, which is not a step "
                                  "directory here")
        return p / name
    if p.is_dir() and not (p / RECIPE_FILE).exists() and (steps := step_dirs(p, RECIPE_FILE)):
        given, newest = printable(str(p), 120), printable(str(p / steps[-1].name), 140)
        if resume:
            raise UsageError(f"--resume {given}: no `{LATEST}` file naming its newest step; "
                             f"resume that step itself (--resume {newest})")
        raise UsageError(f"{given}: a training directory with no `{LATEST}` file naming its "
                         f"newest step; give that step itself ({newest})")
    return p


def step_dirs(directory: Path, holding: str) -> list[Path]:
    """The step-NNNNNN folders of training directory `directory` that hold a file `holding`,
    oldest first."""
    return sorted((d for d in directory.glob("step-*") if d.name[5:].isdigit()
                   and (d / holding).is_file()), key=lambda d: int(d.name[5:]))


def _named(ref: str | Path) -> None:
    """UsageError for an empty name, which a path would read as the working directory."""
    if not str(ref).strip():
        raise UsageError("an empty name: give a recipe file or name, a checkpoint, a training "
                         "directory or a published model")


def located_ref(ref: str | None) -> str | None:
    """`ref` by its absolute path where it names a local file or folder (as a run records
    what it read, so that it resumes from any directory); a recipe name, a Hub id, None as
    given."""
    if ref is None or not ref.strip() or not os.path.exists(os.path.expanduser(ref)):
        return ref
    return os.path.abspath(os.path.expanduser(ref))


def resolved(ref: str) -> str:
    """`ref` with a training directory (or its `latest`) replaced by its newest step; anything
    else as it was given (`./x` stays a path, never the shipped recipe x)."""
    if is_import_source(ref):
        return ref
    step = resolve_checkpoint(ref)
    return ref if step == Path(ref) else str(step)


def is_checkpoint(ref: str | Path) -> bool:
    p = Path(ref)
    return p.is_dir() and (p / RECIPE_FILE).exists()


def load_source_recipe(ref: str | Path) -> Recipe:
    """The recipe of a recipe file, a shipped recipe name, a checkpoint directory (a training
    directory: its newest step's) or an import source (its config alone: the weights are not
    read)."""
    _named(ref)
    ref = resolve_checkpoint(ref) if Path(ref).is_dir() else ref
    _refuse_inner_file(ref)
    if (Path(ref).is_dir() and not (Path(ref) / RECIPE_FILE).exists()
            and json_object(Path(ref) / CONFIG_FILE).get("library_name") == "fsc"):
        raise CheckpointError(f"{Path(ref) / RECIPE_FILE}: missing; an fsc checkpoint (its "
                              f"{CONFIG_FILE} says library_name fsc) is built from its recipe")
    if is_import_source(ref):
        return import_config(ref).recipe
    if is_checkpoint(ref):
        verify_checksums(Path(ref), weights=False)  # a damaged file said so, before it is parsed
        try:
            return load_recipe(Path(ref) / RECIPE_FILE)
        except RecipeError as e:
            written = read_config(Path(ref)).get("fsc_version")
            if not written or written == fsc.__version__:
                raise
            raise RecipeError(f"{e} (the checkpoint was written by fsc {written}; this is fsc "
                              f"{fsc.__version__})") from None
    if Path(ref).is_dir() and held(Path(ref)):
        raise UsageError(f"{printable(str(ref), 120)}: a training directory with no checkpoint "
                         "saved yet: an fsc train is training into it now (fsc runs lists it); "
                         "give it once the run has saved its first step-NNNNNN")
    if Path(ref).is_dir():
        raise UsageError(f"{printable(str(ref), 120)}: is a directory with no checkpoint in it (no "
                         f"{RECIPE_FILE} and {CONFIG_FILE}), no training run (no step-NNNNNN "
                         f"checkpoint) and no published model ({CONFIG_FILE}); give one of those, "
                         "or a recipe file or name")
    return load_recipe(ref)


def _refuse_inner_file(ref: str | Path) -> None:
    """UsageError for one file of a checkpoint or a published model's folder (its weights,
    config.json, card, checksums) given where the folder belongs; a YAML file there (the
    checkpoint's own recipe) reads as a recipe."""
    p = Path(ref)
    if p.is_file() and p.suffix in _FOLDER_FILES and (is_checkpoint(p.parent)
                                                       or is_import_source(p.parent)):
        what = "checkpoint" if is_checkpoint(p.parent) else "published model's folder"
        raise UsageError(f"{printable(str(ref), 120)}: a file in the {what} "
                         f"{printable(str(p.parent), 120)}; give that directory instead")


def checkpoint_config(ref: str | Path) -> dict:
    """A checkpoint's config.json as a dict; empty for a recipe or a checkpoint without one.
    CheckpointError for one that is damaged or from a later format (`read_config`). Its
    checksum is checked where a command first reads the checkpoint (`load_source_recipe`)."""
    return read_config(Path(ref)) if is_checkpoint(ref) else {}


def checkpoint_tokenizer(ref: str | Path) -> Path | None:
    """A checkpoint's own tokenizer (tokenizer.json in its directory, checksummed with its
    weights: an imported model's, or the one its training read), if it has one; one of its
    files that the checksums do not list is refused (`check_tokenizer_listed`)."""
    path = Path(ref) / "tokenizer.json"
    if not (is_checkpoint(ref) and path.is_file()):
        return None
    check_tokenizer_listed(path.parent, read_checksums(path.parent))
    return path.parent


def config_alone(ref: str) -> str:
    """What is said where an hf: source's weights or tokenizer are wanted: fsc reads a Hub
    model's config alone (`fsc import` fetches the rest)."""
    return (f"{ref} is read for its config alone, without its weights or tokenizer; fetch them "
            f"with fsc import {ref} --out DIR, and give DIR")


def has_published_weights(ref: str | Path) -> bool:
    """A local import source with its weights (an hf: source is read for its config alone:
    `fsc import` fetches the weights)."""
    return is_import_source(ref) and not str(ref).startswith("hf:") and has_weights(Path(ref))


def published_origin(ref: str | Path) -> str | None:
    """The published model an imported checkpoint was read from (a folder, or hf:ORG/NAME),
    as `fsc import` recorded it; None for any other source."""
    imported = checkpoint_config(ref).get("imported_from")
    return imported.rpartition(" (")[0] or imported if isinstance(imported, str) else None


@dataclass(frozen=True)
class Source:
    """A model's source read once: `ref` (a training directory resolved to its newest step),
    its recipe (an import source's read from its config; the weights are not read) and, for a
    checkpoint, its config.json (`config`, {} for anything else)."""

    ref: str
    recipe: Recipe
    config: dict

    @classmethod
    def read(cls, ref: str | Path) -> Source:
        ref = resolved(str(ref))
        return cls(ref, load_source_recipe(ref), checkpoint_config(ref))

    @property
    def is_checkpoint(self) -> bool:
        return is_checkpoint(self.ref)

    @property
    def training(self) -> dict:
        """What `fsc train` recorded ({} for none, or a recipe)."""
        trained = self.config.get("training")
        return trained if isinstance(trained, dict) else {}

    def text_tokenizer(self) -> str | None:
        """The tokenizer the model reads text with, by one rule: a checkpoint's own
        tokenizer.json, else the one its training recorded (a path relative to the checkpoint,
        or absolute, as older checkpoints wrote it); a published model's folder: its
        tokenizer.json; None: fsc's byte tokenizer (a recipe's seeded weights, a checkpoint
        trained on bytes), or no tokenizer at all for an import source that has none
        (`tokenizer` says so)."""
        own = checkpoint_tokenizer(self.ref)
        if own is not None:
            return str(own)
        spec = self.training.get("tokenizer")
        if spec:
            return str(Path(self.ref) / spec) if not Path(spec).is_absolute() else spec
        if is_import_source(self.ref) and (Path(self.ref) / "tokenizer.json").is_file():
            return self.ref
        return None

    def tokenizer(self, given: str | Path | None = None, need_mask: bool = True):
        """The model's tokenizer (`text_tokenizer`), or `given` (--tokenizer); `need_mask` for
        a diffusion model. A published model without a tokenizer (its folder, or the checkpoint
        `fsc import` wrote of it) reads ids alone (text is refused in one line), never fsc's
        bytes."""
        spec = given if given is not None else self.text_tokenizer()
        if spec is None and self.published:
            return IdTokenizer(self.recipe.vocab_size, config_alone(self.ref)
                               if self.ref.startswith("hf:") else None)
        try:
            return load_tokenizer(spec, need_mask)
        except UsageError as e:
            if given is None:
                raise
            raise UsageError(f"--tokenizer {e}") from None

    def starts_with_bos(self, tokenizer=None) -> bool:
        """Whether the model's sequences begin with BOS: a published model's (an import
        source, or a checkpoint `fsc import` wrote) as its tokenizer begins a text; any other
        checkpoint as its config.json says (`bos`). fsc trains without one, so a checkpoint
        written before the field existed, and a recipe's seeded weights, begin without BOS
        too. `tokenizer`: the model's own, where the caller has it loaded (`tokenizer()`
        without --tokenizer), so that its tokenizer.json is not read a second time."""
        if self.config.get("bos") is True:
            return True
        if self.published:
            if tokenizer is None:
                spec = self.text_tokenizer()
                tokenizer = None if spec is None else load_tokenizer(spec, need_mask=False)
            return bool(getattr(tokenizer, "adds_bos", False))
        return False

    @property
    def published(self) -> bool:
        """A published model: an import source, or a checkpoint `fsc import` wrote of one
        (trained further or not)."""
        return bool(is_import_source(self.ref) or self.config.get("imported_from"))

    def published_config(self) -> dict:
        """The published config.json of an imported model: the import source's own, or that
        of the folder (or Hub model, from the local Hugging Face cache alone) its checkpoint
        was imported from; {} where it is not at hand."""
        origin = self.ref if is_import_source(self.ref) else published_origin(self.ref)
        if origin is None:
            return {}
        if origin.startswith(HF_PREFIX):
            repo, revision = parse_hf(origin)
            path = try_to_load_from_cache(repo, "config.json", revision=revision)
            return json_object(path) if isinstance(path, str) else {}
        try:  # (published/NAME: the folder its recipe was imported from)
            return json_object(local_dir(origin) / "config.json")
        except ImportRefused:  # a folder that is gone
            return {}

    def published_length(self) -> int | None:
        """A published model's own length, as the harness's hf backend reads it off the model
        (`fsc.imports.published_length`): as its checkpoint recorded it, or (a checkpoint
        older than that record) read off the published model where it is at hand; None where
        none says, or for a model that is not published."""
        if not self.published:
            return None
        recorded = self.config.get("max_length")
        if isinstance(recorded, int):
            return recorded
        return published_length(self.published_config(), self.text_tokenizer())

    @property
    def learned(self) -> bool:
        """Whether the weights learned anything: a trained or imported checkpoint, or a
        published folder's weights; not a recipe's seeded ones, nor a checkpoint of them
        (`fsc build --save`, which records its seed)."""
        if has_published_weights(self.ref):
            return True
        return self.is_checkpoint and self.config.get("seed") is None

    @property
    def drawn(self) -> bool:
        """Whether the weights are drawn at load time from a seed (a recipe, or a published
        config without weights); else they are read from files, whatever the seed."""
        return not (self.is_checkpoint or has_published_weights(self.ref))

    def weights(self, seed: int) -> str:
        """Where the model's weights come from, said plainly: seeded random weights are
        untrained."""
        if has_published_weights(self.ref):
            return f"published weights of {self.ref}"
        if not self.is_checkpoint:
            return f"seeded random weights (seed {seed}, untrained)"
        if self.config.get("imported_from"):
            return f"checkpoint {self.ref}: published weights of {self.config['imported_from']}"
        if self.config.get("seed") is not None:
            return (f"checkpoint {self.ref}: seeded random weights (seed "
                    f"{self.config['seed']}, untrained)")
        return f"checkpoint {self.ref}"
