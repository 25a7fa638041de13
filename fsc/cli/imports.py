"""`fsc import`: a published Hugging Face model as an fsc recipe (and checkpoint)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from fsc.cli.bounds import one_value
from fsc.cli.common import (
    JsonOpt,
    StoreOpt,
    check_store,
    err,
    out,
    output_dir,
    print_json,
    print_plain,
    store_dir,
)


def import_cmd(
    source: Annotated[str, typer.Argument(
        metavar="SOURCE",
        help="A folder with config.json (and *.safetensors or a pytorch_model.bin, tokenizer "
             "files), published/NAME (a published config, as `fsc recipes` lists it), or "
             "hf:ORG/NAME[@REV] on the Hub.")],
    out_arg: Annotated[list[str] | None, typer.Option(
        "--out", metavar="PATH", show_default=False,
        callback=one_value("--out", None, "fsc import writes one recipe or checkpoint"),
        help="Where to write: the checkpoint directory when the source has weights, else the "
             "recipe file (NAME.yaml inside a folder, or a path ending in /). Without it the "
             "recipe is printed.")] = None,
    name: Annotated[str | None, typer.Option(
        "--name", help="Recipe name (default: the folder or repo name).")] = None,
    recipe_only: Annotated[bool, typer.Option(
        "--recipe-only", help="Write the recipe file only, even when weights are present.")
    ] = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Read a published model's config.json as an fsc recipe (G = 1, exact at decode); with
    --out and weights, write an fsc checkpoint with its tokenizer.

    Llama, Mistral, Qwen2, Qwen3, Mamba-2 (transformers' or mamba_ssm's format), Bamba and
    Qwen3-Next import; a feature fsc cannot express exactly (a sliding window on some layers only,
    n_groups > 1, an unknown RoPE scaling, ...) is refused, naming it (docs/import.md).
    """
    from fsc.errors import FscError, UsageError
    from fsc.imports import import_config, pinned, source_has_weights

    if not source.strip():
        raise UsageError("fsc import: SOURCE is empty: give a folder with config.json, "
                         "published/NAME or hf:ORG/NAME")
    (out_arg,) = out_arg  # one value (bounds.one_value)
    _check_name(name)
    at = pinned(source)  # hf:ORG/NAME@REV: config, file list and weights of one commit
    try:
        imported = import_config(at, name)  # config only: refusals come before any download
    except FscError as e:  # named as the user named it (a pull it suggests: the same ref)
        if at == source:
            raise
        raise type(e)(str(e).replace(at.removeprefix("hf:"),
                                     source.removeprefix("hf:"))) from None
    doc = {"source": source, "architecture": imported.architecture,
           "recipe": imported.recipe.name, "recipe_hash": imported.recipe.recipe_hash}
    if out_arg is None:
        _no_store(store)
        if as_json:
            print_json({**doc, "recipe_yaml": imported.recipe_yaml()})
        else:
            print_plain(imported.recipe_yaml())  # `> r.yaml`: never wrapped or styled
        return
    out_path = Path(out_arg)
    weights = not recipe_only and source_has_weights(at)  # nothing downloaded yet
    if not weights:
        _no_store(store)
    if weights:
        if out_path.suffix in (".yaml", ".yml"):
            raise UsageError(f"--out {out_arg}: a recipe file's name, but {source} has weights, "
                             "which import as a checkpoint directory; give a directory, or "
                             "--recipe-only for the recipe alone")
        full = output_dir(out_path, "--out", whole=True)  # absolute: built beside, never inside
        check_store(store)  # before downloading, and before writing what it could not record
        from fsc.checkpoint.registry import register_checkpoint
        from fsc.imports.convert import import_checkpoint

        err.print(f"importing {imported.architecture} weights from {source} into {out_path} ...")
        _, info = import_checkpoint(at, full, name)
        register_checkpoint(store_dir(store), info, "saved")
        doc |= {"checkpoint": info.to_dict()}
    else:
        out_path = _write_recipe(out_arg, imported)
        doc |= {"recipe_file": str(out_path)}
    if as_json:
        print_json(doc)
        return
    what = f"checkpoint {out_path}" if weights else f"recipe {out_path}"
    out.print(f"{imported.architecture} from {source} -> {what} "
              f"(recipe {imported.recipe.name}, hash {imported.recipe.recipe_hash})",
              markup=False, highlight=False)


def _no_store(store: Path | None) -> None:
    """--store where no checkpoint is written: nothing would be recorded in it."""
    from fsc.errors import UsageError

    if store is not None:
        raise UsageError("--store: fsc import records the checkpoint it writes (--out, from a "
                         "source with weights); a recipe is not recorded: drop --store")


def _check_name(name: str | None) -> None:
    """--name as the recipe schema takes it, refused naming --name (not the config)."""
    from fsc.errors import UsageError
    from fsc.sections import MAX_NAME

    if name is None:
        return
    if not name.strip():
        raise UsageError("--name is empty: give the recipe a name, or leave --name out for the "
                         "folder's or repo's")
    if len(name) > MAX_NAME or not name.isprintable():
        why = (f"{len(name)} characters" if len(name) > MAX_NAME
               else "has a control character (newline, tab, escape, ...)")
        raise UsageError(f"--name: {why}; give 1 to {MAX_NAME} printable characters")


def _write_recipe(out_arg: str, imported) -> Path:
    """Write the recipe at --out: the file itself, whose folder must exist (as every command's
    --out file), or NAME.yaml in a folder (one that exists, or a path ending in /, made here
    as --save makes a directory), NAME with any character a file name cannot hold replaced.
    Never over an existing file."""
    from fsc.errors import UsageError
    from fsc.imports.config import file_stem

    out_path = Path(out_arg)
    folder_named = not out_path.is_dir() and out_arg.endswith(("/", os.sep))
    if out_path.is_dir() or folder_named:
        out_path = out_path / f"{file_stem(imported.recipe.name)}.yaml"
    if out_path.exists():
        raise UsageError(f"--out {out_path}: already exists; choose another path")
    folder = next((p for p in out_path.parents if p.exists()), Path("."))
    if not folder.is_dir():
        raise UsageError(f"--out {out_path}: {folder} is a file, not a folder")
    if not folder_named and not out_path.parent.is_dir():
        raise UsageError(f"--out {out_path}: folder {out_path.parent} does not exist")
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)  # (a folder --out named with /)
        with out_path.open("x") as f:
            f.write(imported.recipe_yaml())
    except OSError as e:
        raise UsageError(f"--out {out_path}: cannot write ({e.strerror or e})") from None
    return out_path


def register(app: typer.Typer) -> None:
    app.command("import")(import_cmd)
