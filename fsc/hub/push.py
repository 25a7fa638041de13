"""Push: verify a checkpoint, then commit it to a Hub repository (fsc.hub.hub has the rest of
the Hub client; this part reads the checkpoint's tensors' shapes, so it needs torch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi

from fsc.checkpoint.io import verify_checkpoint
from fsc.checkpoint.layout import CHECKSUMS_FILE, VerifiedCheckpoint
from fsc.hub.hub import STALE_WEIGHTS, get_token, hub_calls, quiet_unless_terminal
from fsc.hub.names import DEFAULT_REVISION, check_repo_id, check_revision


@dataclass
class PushedCheckpoint(VerifiedCheckpoint):
    """A verified checkpoint as committed to the Hub: the repository, branch and new commit."""

    repo: str = ""
    revision: str = ""
    commit_id: str = ""
    commit_url: str = ""
    unchanged: bool = False  # the branch held these files already: no commit was made


def push_checkpoint(path: str | Path, repo: str, revision: str = DEFAULT_REVISION,
                    private: bool = False, message: str | None = None) -> PushedCheckpoint:
    """Verify the checkpoint at `path`, then commit it to branch `revision` of `repo`.

    Creates the repository (private if asked; an existing one keeps its visibility) and the
    branch (from main) when missing.
    """
    check_repo_id(repo)
    check_revision(revision)
    token = get_token()
    info = verify_checkpoint(path)

    quiet_unless_terminal()
    api = HfApi(token=token, library_name="fsc")
    what = f"push to {repo}"
    with hub_calls(what, repo, revision):
        api.create_repo(repo, private=True if private else None, exist_ok=True)
        if revision != DEFAULT_REVISION:
            api.create_branch(repo, branch=revision, exist_ok=True)
        head = api.model_info(repo, revision=revision).sha
        commit = api.upload_folder(
            repo_id=repo,
            folder_path=str(path),
            revision=revision,
            commit_message=message or f"fsc push {info.name} (recipe {info.recipe_hash})",
            allow_patterns=[*info.files, CHECKSUMS_FILE],
            delete_patterns=STALE_WEIGHTS,
        )
    return PushedCheckpoint(**vars(info), repo=repo, revision=revision, commit_id=commit.oid,
                            commit_url=commit.commit_url, unchanged=commit.oid == head)
