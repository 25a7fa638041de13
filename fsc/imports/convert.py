"""Published weights into fsc's model: every fsc tensor filled from the published tensor its
family names, every published tensor used (or refused), then a checkpoint with the tokenizer."""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from fsc.checkpoint.io import save_checkpoint
from fsc.checkpoint.layout import INDEX_FILE
from fsc.errors import ImportRefused
from fsc.imports import (
    CONFIG,
    Imported,
    from_config,
    has_weights,
    local_dir,
    parse_hf,
    pinned,
    published_length,
    read_config,
)
from fsc.imports.fetch import PICKLED, PICKLED_INDEX
from fsc.model.layers import TORCH_DTYPES
from fsc.model.lm import build_model
from fsc.tokenizer import carried_files, load_tokenizer


def _indexed(index: Path) -> list[Path]:
    """The files a weights index (its weight_map) names, each of them there."""
    try:
        names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ImportRefused(f"{index}: malformed index (needs a weight_map object)") from None
    missing = [n for n in names if not (index.parent / n).is_file()]
    if missing:
        raise ImportRefused(f"{index.parent}: {missing[0]}, named by its index, is missing")
    return [index.parent / n for n in names]


def weight_files(directory: Path) -> list[Path]:
    """The safetensors files of a published folder (those its index names, when it has one)."""
    if (directory / INDEX_FILE).is_file():
        return _indexed(directory / INDEX_FILE)
    return sorted(directory.glob("*.safetensors"))


def pickled_files(directory: Path) -> list[Path]:
    """The pytorch_model.bin of a published folder, or the shards its index names."""
    if (directory / PICKLED_INDEX).is_file():
        return _indexed(directory / PICKLED_INDEX)
    return [directory / PICKLED]


def _open(stack: ExitStack, path: Path, device):
    """A published safetensors file, opened; one that is not one is refused naming it."""
    try:
        return stack.enter_context(safe_open(str(path), framework="pt", device=str(device)))
    except (SafetensorError, OSError) as e:
        raise ImportRefused(f"{path}: not a readable safetensors file ({e})") from None


def published_name(imported: Imported, name: str) -> str | None:
    for pattern, repl in imported.family.NAMES:
        if re.fullmatch(pattern, name):
            return re.sub(pattern, repl, name)
    return None


def _fill(imported: Imported, where: dict, device,
          copy: bool | None = None) -> tuple[dict[str, torch.Tensor], set[str]]:
    """(fsc's state dict, the published names used) from `where`: published name -> open file.
    A family's `tensor` hook, where it has one, builds a tensor from published ones (a split,
    a stack); otherwise NAMES renames one."""
    expected = build_model(imported.recipe, device="meta").state_dict()
    zero_ok = getattr(imported.family, "ABSENT_AS_ZERO", ())
    hook = getattr(imported.family, "tensor", None)
    dtype = TORCH_DTYPES[imported.recipe.dtype]
    if copy is None:  # out of the file's memory map on the CPU (see load_checkpoint)
        copy = torch.device(device).type == "cpu"
    state, used = {}, set()

    def read(src: str) -> torch.Tensor:
        if src not in where:
            raise ImportRefused(f"{imported.source}: tensor {src} is missing from the "
                                "published weights")
        used.add(src)
        return where[src].get_tensor(src)

    for name, meta in expected.items():
        try:
            t = hook(name, read, imported.recipe) if hook is not None else None
        except RuntimeError as e:  # a split or stack the published shapes do not allow
            raise ImportRefused(f"{imported.source}: the published tensors of fsc's {name} do "
                                f"not fit its shape {list(meta.shape)} ({e})") from None
        src = published_name(imported, name)
        if t is None and src not in where:
            if any(re.fullmatch(p, name) for p in zero_ok):
                state[name] = torch.zeros(meta.shape, dtype=dtype, device=device)
                continue
            raise ImportRefused(f"{imported.source}: tensor {src or name} is missing from the "
                                "published weights")
        if t is None:
            t = read(src)
        if tuple(t.shape) != tuple(meta.shape):
            squeezed = [s for s in t.shape if s != 1] == [s for s in meta.shape if s != 1]
            if not squeezed:
                raise ImportRefused(f"{imported.source}: tensor {src or name} has shape "
                                    f"{list(t.shape)} but fsc's {name} needs {list(meta.shape)}")
            t = t.reshape(meta.shape)
        state[name] = t.to(dtype, copy=copy)
    return state, used


class _Pickled:
    """A `pytorch_model.bin` (or one of its shards) read as tensors only (torch.load with
    weights_only: no code runs), with safetensors' `get_tensor`: the one format state-spaces
    ships its Mamba-2 weights in."""

    def __init__(self, path: Path, device):
        try:
            self.tensors = torch.load(path, map_location=device, weights_only=True, mmap=True)
        except Exception as e:  # noqa: BLE001 - unpickling refuses in many ways
            raise ImportRefused(f"{path}: not a file of tensors alone ({type(e).__name__}); "
                                "fsc reads pickled weights only as plain tensors") from None
        if not isinstance(self.tensors, dict):
            raise ImportRefused(f"{path}: not a state dict")

    def keys(self):
        return self.tensors.keys()

    def get_tensor(self, name: str) -> torch.Tensor:
        return self.tensors[name]


def fsc_state(imported: Imported, directory: Path, device="cpu",
              copy: bool | None = None) -> dict[str, torch.Tensor]:
    """fsc's state dict (the recipe's dtype) from a published folder's safetensors (or, where
    it has none, its pytorch_model.bin or that file's shards, read as plain tensors); `copy` as
    load_checkpoint's."""
    if not has_weights(directory):
        raise ImportRefused(f"{imported.source}: no weights to import (*.safetensors or "
                            f"{PICKLED})")
    with ExitStack() as stack:
        opened = [_open(stack, f, device) for f in weight_files(directory)] or [
            _Pickled(f, device) for f in pickled_files(directory)]
        where = {k: st for st in opened for k in st.keys()}
        state, used = _fill(imported, where, device, copy)
    ignored = getattr(imported.family, "IGNORED", ())
    extra = sorted(k for k in set(where) - used
                   - ({"lm_head.weight"} if imported.recipe.tie_embeddings else set())
                   if not any(re.fullmatch(p, k) for p in ignored))
    if extra:
        raise ImportRefused(f"{imported.source}: published tensor {extra[0]} has no place in "
                            "fsc's model (a feature fsc does not express)")
    return state


def load_published(ref: str, device="cpu", name: str | None = None, copy: bool | None = None):
    """(Imported, fsc model in eval mode) with the published weights; nothing written. `copy`
    as load_checkpoint's."""
    directory = local_dir(ref, files="all")
    imported = from_config(read_config(directory, ref), name)
    model = build_model(imported.recipe, device="meta")
    model.load_state_dict(fsc_state(imported, directory, device, copy), strict=True, assign=True)
    return imported, model.eval()


def import_checkpoint(ref: str, out: str | Path, name: str | None = None):
    """Write the published model at `ref` as an fsc checkpoint in `out`, its tokenizer files
    beside the weights, all read at one commit (`pinned`). Returns (Imported, SavedCheckpoint)."""
    ref = pinned(ref)
    imported, model = load_published(ref, name=name)
    directory = local_dir(ref, files="all")
    info = save_checkpoint(model, out, recipe_text=imported.recipe_yaml(),
                           include=carried_files(directory),
                           imported_from=f"{origin_of(ref, directory)} "
                                         f"({imported.architecture})",
                           bos=adds_bos(directory),
                           max_length=published_length(directory / CONFIG, directory))
    return imported, info


def origin_of(ref: str, directory: Path | None = None) -> str:
    """Where an import came from, as a checkpoint records it: a local folder by its absolute
    path (so `fsc verify CK --against transformers` finds it from anywhere); hf:ORG/NAME at the
    commit its snapshot `directory` holds (the Hub cache's snapshots/COMMIT), whatever branch
    or tag the ref named, so that a later check reads the weights imported, not a newer main."""
    if not ref.startswith("hf:"):
        return str(Path(ref).resolve())
    if directory is None or not re.fullmatch(r"[0-9a-f]{40}", directory.name):
        return ref
    return f"hf:{parse_hf(ref)[0]}@{directory.name}"


def adds_bos(directory: Path) -> bool:
    """Whether the published tokenizer begins a text with BOS (its tokenizer.json's
    post-processor, as Llama's does): the checkpoint's sequences then begin with it."""
    if not (directory / "tokenizer.json").is_file():
        return False
    return load_tokenizer(directory, need_mask=False).adds_bos
