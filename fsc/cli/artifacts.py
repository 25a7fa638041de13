"""`fsc push`, `fsc pull`, `fsc artifacts`: checkpoints on the Hugging Face Hub and in the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fsc.cli.bounds import one_value
from fsc.cli.common import (
    JsonOpt,
    StoreOpt,
    check_store,
    out,
    output_dir,
    print_json,
    printable,
    store_dir,
)
from fsc.cli.tables import WideOpt
from fsc.errors import UsageError


def _record(rep, action: str, store, as_json: bool, *lines: str, record: bool = True) -> None:
    """Record a pushed or pulled checkpoint's report in the store (unless not `record`), then
    show it: its JSON, or `lines` as plain text (names and paths are never markup)."""
    from fsc.checkpoint.registry import register_checkpoint

    if record:
        register_checkpoint(store_dir(store), rep, action)
    if as_json:
        print_json(rep.to_dict())
        return
    for line in lines:
        out.print(line, highlight=False, markup=False, soft_wrap=True)


def push(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="Checkpoint directory (from build --save, pull), "
                                         "or training directory (its newest step).")],
    repo: Annotated[list[str], typer.Option("--repo", metavar="OWNER/NAME",
                                            help="Hub repository (one).")],
    revision: Annotated[
        str, typer.Option("--revision", help="Branch to commit to (made from main if new).")
    ] = "main",
    private: Annotated[
        bool, typer.Option("--private", help="Create the repository private (an existing "
                                             "public one is refused).")
    ] = False,
    message: Annotated[str | None, typer.Option("--message", help="Commit message.")] = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Verify a checkpoint and commit it to a Hub repository (token: HF_TOKEN or saved login)."""
    from fsc.hub.names import check_branch, check_repo_id

    if len(repo) > 1:
        raise UsageError(f"--repo given {len(repo)} times ({', '.join(map(repr, repo))}); "
                         "a checkpoint is pushed to one repository")
    repo = check_repo_id(repo[0], "--repo")
    check_branch(revision, "--revision")
    check_store(store)
    from fsc.hub.push import push_checkpoint
    from fsc.source import RECIPE_FILE, is_checkpoint, resolved

    path = Path(resolved(str(path)))  # a training directory (or its `latest`): its newest step
    if not path.exists():  # bad input, as fsc verify and fsc decode say it: before the token
        raise UsageError(f"{printable(str(path))}: no such checkpoint directory")
    if not is_checkpoint(path):  # a folder of something else, or a file: no checkpoint at all
        raise UsageError(f"{printable(str(path))}: is no checkpoint (no {RECIPE_FILE} in it); "
                         "fsc push takes a checkpoint fsc wrote (fsc build --save, fsc train, "
                         "fsc import) or a training directory")
    rep = push_checkpoint(path, repo, revision=revision, private=private, message=message)
    at, commit = f"{rep.repo}@{rep.revision}", rep.commit_id[:12]
    if rep.unchanged and rep.new_branch:  # a new branch at main's commit: recorded, no commit
        _record(rep, "pushed", store, as_json, f"made branch {at} from main, which holds "
                f"{rep.name} already (commit {commit}); nothing new to commit")
    elif rep.unchanged:  # nothing changed on the Hub: nothing to record
        _record(rep, "pushed", store, as_json, f"nothing new to push: {at} holds {rep.name} "
                f"already (commit {commit})", record=False)
    else:
        _record(rep, "pushed", store, as_json, f"pushed {rep.name} ({len(rep.files)} files, "
                f"recipe {rep.recipe_hash}) to {at}, commit {commit}", rep.commit_url)


def pull(
    ref: Annotated[str, typer.Argument(metavar="REF", help="OWNER/NAME or OWNER/NAME@REVISION (branch, tag, "
                                            "commit).")],
    dest: Annotated[list[Path] | None, typer.Option(
        "--dir", callback=one_value("--dir", None, "a checkpoint is pulled into one directory"),
        metavar="DIR", help="Destination (default: checkpoints/OWNER__NAME[@REVISION]).",
        show_default=False),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace an existing checkpoint at the destination "
                                           "(only once the new one is verified).")
    ] = False,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Download a checkpoint, verify every checksum, then move it into place."""
    from fsc.hub.names import default_pull_dir, parse_repo_ref

    (dest,) = dest  # one value (bounds.one_value)
    repo, revision = parse_repo_ref(ref)
    dest = output_dir(dest or default_pull_dir(repo, revision), "--dir" if dest else
                      "destination", replace=force, whole=True,
                      hint="; pass --force to replace it or --dir to pull elsewhere")
    check_store(store)
    from fsc.hub.hub import pull_checkpoint

    rep = pull_checkpoint(repo, revision, dest=dest, force=force)
    _record(rep, "pulled", store, as_json,
            f"pulled {rep.repo}@{rep.revision} (commit {rep.commit_id[:12]}, "
            f"{rep.name}, {len(rep.files)} files verified) into {rep.path}")


def artifacts(store: StoreOpt = None, wide: WideOpt = False, as_json: JsonOpt = False) -> None:
    """Checkpoints the store knows: where they live, where they were pushed or pulled. At the
    terminal's width the path stays whole (folded onto more lines if it must): the commit, the
    time, the action and then the Hub repository leave first (--wide keeps them all)."""
    from fsc.checkpoint.registry import list_artifacts

    check_store(store, write=False)
    rows = list_artifacts(store_dir(store))
    if as_json:  # times as fsc query --json writes them (docs/store.md)
        from fsc.jsonsafe import stored

        print_json(stored(rows))
        return
    if not rows:
        out.print(f"no checkpoints recorded in {store_dir(store)} yet", markup=False)
        return
    from rich.text import Text

    from fsc.cli.tables import fitted, show

    columns = ("when (UTC)", "action", "path", "recipe", "hub", "commit")
    records = []
    for r in rows:
        hub = f"{r['repo']}@{r['revision']}" if r.get("repo") else "-"
        path = r["path"] if r["present"] else f"{r['path']} (gone)"
        cells = (f"{r['created_at']:%Y-%m-%d %H:%M:%S}", r["action"], path,
                 r.get("recipe") or (r["recipe_hash"] or "-")[:12], hub,
                 (r.get("commit_id") or "-")[:12])
        records.append({c: Text(printable(v, 10**4)) for c, v in zip(columns, cells)})
    show(out, fitted(f"checkpoints in {printable(str(store_dir(store)))}", columns, records, out,
                     drop=("commit", "when (UTC)", "action", "hub"), left=columns,
                     fold=("path",), width=None if wide else -1), wide)


def register(app: typer.Typer) -> None:
    app.command("push")(push)
    app.command("pull")(pull)
    app.command("artifacts")(artifacts)
