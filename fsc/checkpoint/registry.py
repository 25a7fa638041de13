"""Checkpoint actions recorded in the store: saved, pushed and pulled (never a token)."""

from __future__ import annotations

import json
from pathlib import Path

from fsc.checkpoint.layout import RECIPE_FILE, CheckpointInfo, read_checksums
from fsc.errors import RecipeError
from fsc.recipe import load_recipe
from fsc.store import Store


def _register_recipe(store: Store, info: CheckpointInfo) -> None:
    """The checkpoint's recipe, so that `fsc artifacts` names it (not its hash alone)."""
    path = Path(info.path) / RECIPE_FILE
    try:
        recipe = load_recipe(path) if path.is_file() else None
    except RecipeError:
        recipe = None
    if recipe is not None and recipe.recipe_hash == info.recipe_hash:
        store.register_recipe(recipe.name, recipe.recipe_hash, recipe.to_yaml(),
                              recipe.layer_plan)


def register_checkpoint(store_dir: str | Path, info: CheckpointInfo, action: str) -> str:
    """Record one checkpoint action (what save, push or pull returned) and the checkpoint's
    recipe; sets and returns its artifact id."""
    store = Store(store_dir)
    _register_recipe(store, info)
    info.artifact_id = store.register_artifact(
        path=str(Path(info.path).resolve()),
        recipe_hash=info.recipe_hash,
        files_sha256=info.files,
        repo=getattr(info, "repo", None),
        revision=getattr(info, "revision", None),
        commit_id=getattr(info, "commit_id", None),
        action=action,
    )
    return info.artifact_id


def list_artifacts(store_dir: str | Path) -> list[dict]:
    """Every recorded action, oldest first, with `files_sha256` parsed and whether `path`
    still holds a checkpoint directory on this machine."""
    rows = Store(store_dir).artifacts()
    for row in rows:
        if isinstance(row.get("files_sha256"), str):
            row["files_sha256"] = json.loads(row["files_sha256"])
        row["present"] = bool(row.get("path")) and Path(row["path"]).is_dir()
    return rows


def register_trained(store_dir: str | Path, out: str | Path, recipe_hash: str) -> list[str]:
    """Record the step checkpoints `fsc train` wrote into `out` that the store does not know
    yet (action 'saved', their files from each checksum list); return their artifact ids. A
    step is known by its path and its files: one saved again where a removed run's step was
    (the same --out, other weights) is recorded too."""
    known = {(row["path"], json.dumps(row["files_sha256"], sort_keys=True))
             for row in list_artifacts(store_dir)}
    ids = []
    for path in sorted(Path(out).glob("step-*")):
        step = path.name.removeprefix("step-")
        if not (step.isdigit() and path.is_dir()):
            continue
        files = read_checksums(path)
        if (str(path.resolve()), json.dumps(files, sort_keys=True)) in known:
            continue
        info = CheckpointInfo(str(path), path.name, recipe_hash, files)
        ids.append(register_checkpoint(store_dir, info, "saved"))
    return ids
