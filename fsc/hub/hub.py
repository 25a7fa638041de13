"""Push checkpoint directories to the Hugging Face Hub and pull them back, verified.

huggingface_hub reads HF_ENDPOINT, HF_HOME, HF_TOKEN, HF_HUB_OFFLINE and HF_HUB_DISABLE_XET
as usual. The token is looked up once (HF_TOKEN, then the saved login) and handed to the client;
fsc never prints, logs or records it. Every failure of the client becomes one `HubError` line.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi, constants, hf_hub_download, snapshot_download
from huggingface_hub import errors as hf
from huggingface_hub import get_token as hf_get_token
from huggingface_hub.errors import RemoteEntryNotFoundError
from huggingface_hub.utils import disable_progress_bars

from fsc.checkpoint.layout import (
    CHECKSUMS_FILE,
    OWNED_FILES,
    RECIPE_FILE,
    CheckpointInfo,
    move_into_place,
    read_checksums,
    refuse_existing,
    temp_dir_beside,
    verify_checksums,
)
from fsc.errors import CheckpointError, FscError, HubError, RecipeError
from fsc.hub.names import (
    DEFAULT_REVISION,
    check_repo_id,
    default_pull_dir,
)
from fsc.hub.reach import quiet
from fsc.recipe import load_recipe
from fsc.text import first_line

_TRANSPORT_MODULES = {"httpx", "httpx2", "httpcore", "requests", "urllib3"}
# Transport errors of a connection that was made and then broke (not "cannot reach").
_BROKEN = {"RemoteProtocolError", "ReadError", "WriteError", "ProtocolError", "IncompleteRead",
           "ChunkedEncodingError", "ConnectionResetError", "BrokenPipeError"}


@dataclass
class PulledCheckpoint(CheckpointInfo):
    """A checkpoint pulled from the Hub: the repository, the revision asked for and the commit
    it resolved to."""

    repo: str
    revision: str
    commit_id: str
    artifact_id: str | None = None


def _endpoint() -> str:
    return constants.ENDPOINT


def _is_transport_error(e: BaseException) -> bool:
    return any(c.__module__.split(".")[0] in _TRANSPORT_MODULES for c in type(e).__mro__)


def hub_error(e: BaseException, what: str, repo: str, revision: str | None) -> HubError | None:
    """One line for a failure of the Hub client, or None when `e` is not one (a bug: re-raise)."""
    where = f"{repo}@{revision}" if revision else repo
    if isinstance(e, hf.GatedRepoError):
        return HubError(f"{what}: {repo} is gated; request access to it on the Hub first")
    if isinstance(e, hf.RepositoryNotFoundError):
        return HubError(f"{what}: repository {repo} not found at {_endpoint()} (check the name; "
                        "a private repository also needs a token that can read it)")
    if isinstance(e, hf.RevisionNotFoundError):
        return HubError(f"{what}: revision {revision!r} not found in {repo}")
    if isinstance(e, hf.RemoteEntryNotFoundError):
        detail = first_line(e.server_message or e)
        return HubError(f"{what}: a file is missing in {where}: {detail}")
    if isinstance(e, hf.HfHubHTTPError) and e.response is not None:
        status = e.response.status_code
        if status == 401:
            return HubError(f"{what}: the Hub refused the token (HTTP 401); check HF_TOKEN or "
                            "`hf auth login`")
        if status == 403:
            return HubError(f"{what}: the token has no access to {repo} (HTTP 403)")
        detail = first_line(e.server_message or "") or e.response.reason_phrase or "no message"
        return HubError(f"{what}: the Hub answered HTTP {status} for {where}: {detail}")
    if isinstance(e, hf.OfflineModeIsEnabled):
        return HubError(f"{what}: HF_HUB_OFFLINE is set; unset it to reach the Hub")
    if isinstance(e, hf.LocalEntryNotFoundError) and e.__cause__ is not None:
        return hub_error(e.__cause__, what, repo, revision)
    if _is_transport_error(e) or isinstance(e, (ConnectionError, TimeoutError)):
        detail = first_line(e) or type(e).__name__
        if type(e).__name__ in _BROKEN:
            return HubError(f"{what}: the connection to the Hub at {_endpoint()} broke off: "
                            f"{detail}")
        return HubError(f"{what}: cannot reach the Hub at {_endpoint()}: {detail}")
    if isinstance(e, (OSError, ValueError, RuntimeError)):
        cause = e.__cause__
        detail = first_line(e) + (f" ({first_line(cause)})" if cause is not None else "")
        return HubError(f"{what}: {where}: {detail or type(e).__name__}")
    return None


@contextmanager
def hub_calls(what: str, repo: str, revision: str | None) -> Iterator[None]:
    """Every failure of the Hub client in the body as one HubError line; the client's own
    warnings (retries, resumed downloads, a commit with nothing new) are not shown."""
    try:
        with quiet():
            yield
    except FscError:
        raise
    except Exception as e:
        mapped = hub_error(e, what, repo, revision)
        if mapped is None:
            raise
        raise mapped from e


def quiet_unless_terminal() -> None:
    """huggingface_hub's progress bars only on an interactive stderr (logs stay one line)."""
    if not sys.stderr.isatty():
        disable_progress_bars()


def get_token() -> str:
    """The Hub token (HF_TOKEN, then the saved login); without one a HubError, raised before
    any network call."""
    token = hf_get_token()
    if not token:
        raise HubError("no Hugging Face token: set HF_TOKEN or run `hf auth login` "
                       "(a token with write access)")
    return token


def _download_checksums(repo: str, asked: str, commit: str, download: Path) -> None:
    # into a directory of its own: snapshot_download, when it cannot list the repository,
    # returns a non-empty local_dir as it is instead of failing
    try:
        hf_hub_download(repo, CHECKSUMS_FILE, revision=commit, local_dir=download)
    except RemoteEntryNotFoundError as e:
        raise HubError(f"pull {repo}: {repo}@{asked} is not an fsc checkpoint "
                       f"(it has no {CHECKSUMS_FILE})") from e


@contextmanager
def _unverified(repo: str, asked: str, tmp: Path) -> Iterator[None]:
    """Checksum or recipe failures of a download, named by file (not by temporary path)."""
    try:
        yield
    except (CheckpointError, RecipeError) as e:
        detail = re.sub(rf"{re.escape(str(tmp))}/(checksums|download|checkpoint)/", "", str(e))
        raise HubError(f"pull {repo}: {repo}@{asked} failed verification, nothing was "
                       f"written: {detail}") from e


def pull_checkpoint(repo: str, revision: str | None = None, dest: str | Path | None = None,
                    force: bool = False) -> PulledCheckpoint:
    """Download `repo` at `revision` (default main), verify every checksum, move it into `dest`.

    The download goes to a temporary directory beside `dest`; `dest` changes only once the
    checkpoint is complete and verified (with `force`, an existing checkpoint there is replaced
    then, and only then).
    """
    check_repo_id(repo)
    # absolute: the temporary directory goes beside `dest`, never inside it (`--dir .`)
    dest = Path(os.path.abspath(dest if dest is not None else default_pull_dir(repo, revision)))
    if not force:
        refuse_existing(dest, "; pass --force to replace it or --dir to pull elsewhere")
    elif (dest.is_dir() and any(dest.iterdir())
          and not (dest / CHECKSUMS_FILE).is_file()):
        raise CheckpointError(f"{dest}: not a checkpoint directory (it has no {CHECKSUMS_FILE}); "
                              "--force replaces only a checkpoint: pass --dir to pull elsewhere")

    quiet_unless_terminal()
    asked = revision or DEFAULT_REVISION
    made = [p for p in dest.parents if not p.exists()]  # folders the pull makes, nearest first
    tmp = temp_dir_beside(dest, "pull")
    sums, download, ckpt = tmp / "checksums", tmp / "download", tmp / "checkpoint"
    done = False
    try:
        with hub_calls(f"pull {repo}", repo, asked):
            commit = HfApi().model_info(repo, revision=asked).sha
            _download_checksums(repo, asked, commit, sums)
            with _unverified(repo, asked, tmp):
                names = list(read_checksums(sums))
            snapshot_download(repo, revision=commit, local_dir=download,
                              allow_patterns=[*names, *OWNED_FILES])
        ckpt.mkdir()
        (sums / CHECKSUMS_FILE).rename(ckpt / CHECKSUMS_FILE)
        for name in OWNED_FILES:  # the owner's model card, as the Hub holds it: not verified
            if (download / name).is_file():
                (download / name).rename(ckpt / name)
        for name in names:
            if not (download / name).is_file():
                raise HubError(f"pull {repo}: {repo}@{asked} lacks {name}, "
                               f"which its {CHECKSUMS_FILE} lists")
            (download / name).rename(ckpt / name)
        with _unverified(repo, asked, tmp):
            files = verify_checksums(ckpt)
            recipe = load_recipe(ckpt / RECIPE_FILE)
        move_into_place(ckpt, dest, replace=force)
        done = True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in made if not done else ():
            if any(folder.iterdir()):
                break
            folder.rmdir()
    return PulledCheckpoint(str(dest.resolve()), recipe.name, recipe.recipe_hash, files, repo,
                            asked, commit)
