"""Save, verify and load checkpoint directories: safetensors weights, never anything pickled.

Layout (see docs/checkpoint.md): `fsc_recipe.yaml`, `config.json`, `README.md`, the weights as
`model.safetensors` or, past `max_shard_bytes` of tensor data, `model-0000i-of-0000n.safetensors`
shards plus `model.safetensors.index.json`, and `checksums.sha256` over all of them.

Loading checks every checksum before reading any tensor, then checks the safetensors headers
(names, shapes, dtypes) against the model the recipe builds, and only then reads tensor data.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from fsc.checkpoint.card import config_json, model_card
from fsc.checkpoint.layout import (
    CARD_FILE,
    CONFIG_FILE,
    INDEX_FILE,
    RECIPE_FILE,
    WEIGHTS_FILE,
    SavedCheckpoint,
    VerifiedCheckpoint,
    check_name,
    move_into_place,
    read_config,
    refuse_existing,
    shard_name,
    temp_dir_beside,
    verify_checksums,
    write_checksums,
)
from fsc.errors import CheckpointError
from fsc.model.lm import build_model, count_params
from fsc.recipe import Recipe, load_recipe

MAX_SHARD_BYTES = 5 * 10**9  # tensor bytes per weights file (5 GB, decimal) before sharding
_MAX_HEADER_BYTES = 100 * 2**20

Spec = tuple[str, tuple[int, ...]]  # (safetensors dtype name, shape)


def _st_dtype(dtype) -> str:
    names = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
             torch.float64: "F64", torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}
    return names.get(dtype, str(dtype))


def _expected(recipe: Recipe) -> dict[str, Spec]:
    """Name -> (dtype, shape) of every tensor of the recipe's model (built on meta: no memory)."""
    meta = build_model(recipe, device="meta")
    return {k: (_st_dtype(v.dtype), tuple(v.shape)) for k, v in meta.state_dict().items()}


def _check_tensors(found: dict[str, tuple[str, Spec]], expected: dict[str, Spec],
                   whole: str) -> None:
    """`found` maps tensor name -> (where it is, spec); every mismatch names where and which."""
    for name, (where, (dtype, shape)) in found.items():
        if name not in expected:
            raise CheckpointError(f"{where}: tensor {name!r} is not part of the recipe's model")
        want_dtype, want_shape = expected[name]
        if shape != want_shape:
            raise CheckpointError(f"{where}: tensor {name!r} has shape {list(shape)} but the "
                                  f"recipe's model needs {list(want_shape)}")
        if dtype != want_dtype:
            raise CheckpointError(f"{where}: tensor {name!r} has dtype {dtype} but the "
                                  f"recipe's model needs {want_dtype}")
    missing = [k for k in expected if k not in found]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise CheckpointError(f"{whole}: tensor {missing[0]!r} of the recipe's model "
                              f"is missing{more}")


def read_header(path: Path) -> dict[str, Spec]:
    """Tensor name -> (dtype, shape) from a safetensors file's JSON header; no tensor data read."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n > min(size - 8, _MAX_HEADER_BYTES):
                raise CheckpointError(f"{path}: not a safetensors file (bad header length)")
            header = json.loads(f.read(n))
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: cannot read the safetensors header ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: not a safetensors file (header is not a JSON object)")
    specs, end = {}, 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            specs[name] = (str(entry["dtype"]), tuple(int(d) for d in entry["shape"]))
            end = max(end, int(entry["data_offsets"][1]))
        except (KeyError, TypeError, ValueError, IndexError):
            raise CheckpointError(f"{path}: tensor {name!r} has a malformed header entry") from None
    if end != size - 8 - n:  # a file cut short (or grown) after its header was written
        raise CheckpointError(f"{path}: holds {size - 8 - n:,} bytes of tensor data but its "
                              f"header describes {end:,}; the file is truncated or damaged")
    return specs


def _weight_files(directory: Path, files: dict[str, str]) -> tuple[list[str], dict | None]:
    """(weight file names, index weight_map or None) of a checkpoint whose checksums passed."""
    if INDEX_FILE in files:
        path = directory / INDEX_FILE
        try:
            weight_map = json.loads(path.read_text())["weight_map"]
            assert isinstance(weight_map, dict)
            shards = sorted({check_name(str(v), str(path)) for v in weight_map.values()})
        except (ValueError, KeyError, TypeError, AssertionError):
            raise CheckpointError(f"{path}: malformed index (needs a weight_map object)") from None
        for shard in shards:
            if shard not in files:
                raise CheckpointError(f"{path}: shard {shard} is not listed in the checksums")
        return shards, weight_map
    if WEIGHTS_FILE in files:
        return [WEIGHTS_FILE], None
    raise CheckpointError(f"{directory}: the checksums list no weights "
                          f"({WEIGHTS_FILE} or {INDEX_FILE})")


def _inspect(directory: Path) -> tuple[Recipe, dict[str, str], list[str], dict]:
    """Checksums, config, recipe, then every tensor header against the recipe's model."""
    files = verify_checksums(directory)
    read_config(directory)
    recipe = load_recipe(directory / RECIPE_FILE)
    weight_files, weight_map = _weight_files(directory, files)
    found: dict[str, tuple[str, Spec]] = {}
    for wf in weight_files:
        where = str(directory / wf)
        for name, spec in read_header(directory / wf).items():
            if name in found:
                raise CheckpointError(f"{where}: tensor {name!r} is also in {found[name][0]}")
            if weight_map is not None and weight_map.get(name) != wf:
                raise CheckpointError(f"{where}: tensor {name!r} is not mapped to this file "
                                      f"in {INDEX_FILE}")
            found[name] = (where, spec)
    for name, wf in (weight_map or {}).items():
        if name not in found:
            raise CheckpointError(f"{directory / INDEX_FILE}: maps tensor {name!r} to {wf}, "
                                  "which does not hold it")
    whole = directory / (INDEX_FILE if weight_map is not None else WEIGHTS_FILE)
    _check_tensors(found, _expected(recipe), str(whole))
    return recipe, files, weight_files, found


def verify_checkpoint(path: str | Path) -> VerifiedCheckpoint:
    """Check a checkpoint without reading tensor data."""
    directory = Path(path)
    recipe, files, weight_files, found = _inspect(directory)
    return VerifiedCheckpoint(str(directory.resolve()), recipe.name, recipe.recipe_hash, files,
                              weight_files,
                              sum(math.prod(shape) for _, (_, shape) in found.values()))


def load_checkpoint(path: str | Path, device="cpu", dtype=None, copy: bool | None = None):
    """(recipe, model in eval mode) from a checkpoint directory, verified before use.

    `dtype` casts the weights after they are checked against the recipe (None keeps the
    recipe's dtype). `copy` takes the tensors out of the file's memory map (None: on the CPU,
    see below); a caller that copies them anyway (`fsc.model.cpu_layout`) says False.
    """
    directory = Path(path)
    recipe, _, weight_files, _ = _inspect(directory)
    model = build_model(recipe, device="meta", dtype=dtype)
    target = model.state_dict()
    state = {}
    # On the CPU the file's tensors lie in its memory map; a copy in the process's own memory
    # streams faster (weight-bound decoding: ~10 % per token at Qwen3-0.6B's shape, §17)
    copy = torch.device(device).type == "cpu" if copy is None else copy
    for wf in weight_files:
        for name, tensor in load_file(directory / wf, device=str(device)).items():
            state[name] = tensor.to(dtype=target[name].dtype, copy=copy)
    model.load_state_dict(state, strict=True, assign=True)
    assert not any(t.is_meta for t in (*model.parameters(), *model.buffers())), "left on meta"
    return recipe, model.eval()


def _plan_shards(sizes: dict[str, int], max_shard_bytes: int) -> list[list[str]]:
    """Tensor names per shard, in order; a shard closes before it would pass the limit."""
    shards: list[list[str]] = [[]]
    used = 0
    for name, n in sizes.items():
        if shards[-1] and used + n > max_shard_bytes:
            shards.append([])
            used = 0
        shards[-1].append(name)
        used += n
    return shards


def canonical_header(path: Path) -> None:
    """Rewrite a safetensors file's metadata in sorted key order. safetensors writes it from a
    hash map whose order changes from process to process, so equal weights gave files with
    other bytes (and checksums, and Hub uploads); the header keeps its length, so the data
    offsets stay."""
    with open(path, "r+b") as f:
        n = int.from_bytes(f.read(8), "little")
        raw = f.read(n)
        head = json.loads(raw, object_pairs_hook=dict)
        meta = head.get("__metadata__")
        if not meta:
            return
        head["__metadata__"] = dict(sorted(meta.items()))
        new = json.dumps(head, separators=(",", ":"), ensure_ascii=False).encode()
        if len(new) != len(raw.rstrip(b" ")):
            return  # not the layout expected: left as written
        f.seek(8)
        f.write(new + b" " * (n - len(new)))


def save_checkpoint(model, path: str | Path, seed: int | None = None,
                    max_shard_bytes: int = MAX_SHARD_BYTES, training: dict | None = None,
                    extra=None, recipe_text: str | None = None,
                    include: tuple[Path, ...] = (),
                    imported_from: str | None = None, bos: bool = False,
                    max_length: int | None = None) -> SavedCheckpoint:
    """Write `model` (an fsc LM; its recipe is `model.recipe`) as a checkpoint directory.

    Builds the directory beside `path` and renames it into place; refuses a non-empty `path`.
    `seed` records seeded (untrained) weights in the card; `training` what `fsc train` did
    (data, objective, steps, final loss); `bos` whether the model's sequences begin with BOS
    (fsc trains without; `fsc decode` follows the record). `extra(directory)` may write files
    of its own (the training state) before the rename; they are not in the checksums, and
    never pushed. `recipe_text` is the recipe file's text (a recipe with comments; it must
    validate to the model's recipe); `include` files (an imported model's tokenizer) are copied
    in, checksummed; `imported_from` names a published model the weights came from (config and
    card say so), `max_length` its own length (`fsc.imports.published_length`, which the
    harness reads as transformers' would).
    """
    dest = Path(path)
    recipe: Recipe = model.recipe
    refuse_existing(dest)
    state = {k: v.detach() for k, v in model.state_dict().items()}
    if any(t.is_meta for t in state.values()):
        raise CheckpointError(f"{dest}: the model is on the meta device (shapes only); "
                              "build it on a real device to save it")
    where = f"model of {recipe.name}"
    _check_tensors({k: (where, (_st_dtype(t.dtype), tuple(t.shape))) for k, t in state.items()},
                   _expected(recipe), where)
    sizes = {k: t.numel() * t.element_size() for k, t in state.items()}
    shards = _plan_shards(sizes, max_shard_bytes)
    names = [WEIGHTS_FILE] if len(shards) == 1 else [shard_name(i + 1, len(shards))
                                                      for i in range(len(shards))]
    params = count_params(model)
    cache_token, cache_empty = model.cache_bytes(1, 1), model.cache_bytes(1, 0)
    facts = {
        "n_params": params["total"],
        "params_by_kind": {k: v for k, v in params.items() if k != "total"},
        "weight_bytes": sum(sizes.values()),
        "weight_files": names,
        "kv_bytes_per_token": cache_token.kv_bytes,
        "state_bytes_per_sequence": cache_empty.state_bytes,
        "seed": seed,
        "bos": bos,
    }
    if training is not None:
        facts["training"] = training
    if imported_from is not None:
        facts["imported_from"] = imported_from
    if max_length is not None:
        facts["max_length"] = max_length
    tmp = temp_dir_beside(dest, "save")
    try:
        metadata = {"format": "pt", "fsc_recipe_hash": recipe.recipe_hash}
        for name, keys in zip(names, shards, strict=True):
            save_file({k: state[k].contiguous().cpu() for k in keys}, tmp / name, metadata=metadata)
            canonical_header(tmp / name)
        if len(names) > 1:
            weight_map = {k: name for name, keys in zip(names, shards, strict=True) for k in keys}
            index = {"metadata": {"total_size": facts["weight_bytes"]}, "weight_map": weight_map}
            (tmp / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
            names = [*names, INDEX_FILE]
        (tmp / RECIPE_FILE).write_text(recipe_text or recipe.to_yaml())
        assert load_recipe(tmp / RECIPE_FILE).recipe_hash == recipe.recipe_hash
        (tmp / CONFIG_FILE).write_text(config_json(recipe, facts))
        (tmp / CARD_FILE).write_text(model_card(recipe, facts,
                                                 tuple(Path(f).name for f in include)))
        for f in include:
            shutil.copyfile(f, tmp / check_name(Path(f).name, str(f)))
        files = write_checksums(tmp, [*names, RECIPE_FILE, CONFIG_FILE,
                                      *(Path(f).name for f in include)])  # (not the card)
        if extra is not None:
            extra(tmp)
        move_into_place(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return SavedCheckpoint(str(dest.resolve()), recipe.name, recipe.recipe_hash, files,
                           facts["weight_files"], facts["n_params"],
                           weight_bytes=facts["weight_bytes"], seed=seed)
