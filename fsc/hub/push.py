"""Push: verify a checkpoint, then commit it to a Hub repository (fsc.hub.hub has the rest of
the Hub client; this part reads the checkpoint's tensors' shapes, so it needs torch)."""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi
from huggingface_hub.errors import RevisionNotFoundError

from fsc.checkpoint.io import verify_checkpoint
from fsc.checkpoint.layout import CHECKSUMS_FILE, INDEX_FILE, OWNED_FILES, VerifiedCheckpoint
from fsc.errors import UsageError
from fsc.hub.hub import get_token, hub_calls, quiet_unless_terminal
from fsc.hub.names import DEFAULT_REVISION, check_branch, check_repo_id
from fsc.tokenizer import CARRIED_FILES


@dataclass
class PushedCheckpoint(VerifiedCheckpoint):
    """A verified checkpoint as committed to the Hub: the repository, branch and new commit."""

    repo: str = ""
    revision: str = ""
    commit_id: str = ""
    commit_url: str = ""
    unchanged: bool = False  # the branch held these files already: no commit was made
    new_branch: bool = False  # the push made the branch, from main


def _is_stale(name: str, keep: set[str]) -> bool:
    """Whether a file of the revision belongs to the checkpoint it held and not to the new one:
    a top-level weight file, the index or a carried tokenizer file the new one does not list
    (files in folders are the repository owner's, left as they are)."""
    return ("/" not in name and name not in keep
            and (name.endswith(".safetensors") or name in (INDEX_FILE, *CARRIED_FILES)))


def push_checkpoint(path: str | Path, repo: str, revision: str = DEFAULT_REVISION,
                    private: bool = False, message: str | None = None) -> PushedCheckpoint:
    """Verify the checkpoint at `path`, then commit it to branch `revision` of `repo`.

    Creates the repository (private if asked) and the branch (from main) when missing. A
    `private` push to a repository that exists and is public is refused before any commit.
    """
    check_repo_id(repo)
    check_branch(revision)
    token = get_token()
    info = verify_checkpoint(path)

    quiet_unless_terminal()
    api = HfApi(token=token, library_name="fsc")
    with hub_calls(f"push to {repo}", repo, revision):
        api.create_repo(repo, private=True if private else None, exist_ok=True)
        if private and api.model_info(repo).private is False:
            raise UsageError(f"push to {repo}: {repo} exists and is public; --private only "
                             "makes a new repository private (make it private on the Hub "
                             "first, or push without --private)")
        new_branch = False
        try:
            head = api.model_info(repo, revision=revision)
        except RevisionNotFoundError:
            if revision == DEFAULT_REVISION:
                raise
            api.create_branch(repo, branch=revision, exist_ok=True)
            head, new_branch = api.model_info(repo, revision=revision), True
        keep = {*info.files, CHECKSUMS_FILE,  # and the model card, as its owner left it
                *(name for name in OWNED_FILES if (Path(path) / name).is_file())}
        stale = [s.rfilename for s in head.siblings or () if _is_stale(s.rfilename, keep)]
        commit = api.upload_folder(
            repo_id=repo,
            folder_path=str(path),
            revision=revision,
            commit_message=message or f"fsc push {info.name} (recipe {info.recipe_hash})",
            allow_patterns=sorted(keep),
            delete_patterns=[glob.escape(name) for name in stale] or None,
        )
    return PushedCheckpoint(**vars(info), repo=repo, revision=revision, commit_id=commit.oid,
                            commit_url=commit.commit_url, unchanged=commit.oid == head.sha,
                            new_branch=new_branch)
