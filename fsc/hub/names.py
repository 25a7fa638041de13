"""Hub names checked before any network call or heavy import: repository ids, revisions, the
default pull directory (a destination that is the current directory: fsc.paths)."""

from __future__ import annotations

import re
from pathlib import Path

from fsc.errors import UsageError

DEFAULT_REVISION = "main"
PULL_ROOT = Path("checkpoints")
# The Hub's rules for each half of OWNER/NAME: 1 to 96 of [A-Za-z0-9._-], neither starting nor
# ending with '-' or '.', no '--' or '..', the name not ending in '.git'.
_PART = r"(?![-.])[A-Za-z0-9._-]{1,96}(?<![-.])"
_REPO_ID = re.compile(rf"{_PART}/{_PART}")

# What git refuses in a branch or tag name (git check-ref-format), so the Hub would too.
_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^[/.-]|[/.]$|\.lock$|^@$")


def parse_repo_ref(ref: str) -> tuple[str, str | None]:
    """``OWNER/NAME[@REVISION]`` -> (repo id, revision or None)."""
    repo, _, revision = ref.partition("@")
    check_repo_id(repo)
    if "@" in ref and not revision:
        raise UsageError(f"{ref!r}: empty revision after '@'")
    return repo, check_revision(revision, f"{ref!r}:") if revision else None


def check_repo_id(repo: str, what: str = "") -> str:
    """UsageError unless `repo` is OWNER/NAME (`what`, e.g. "--repo", leads the message)."""
    if repo.startswith("hf:"):
        raise UsageError(f"{what} {repo!r}: give OWNER/NAME without 'hf:' (that prefix names a "
                         "published model to the commands that read one)".lstrip())
    if (not _REPO_ID.fullmatch(repo) or "--" in repo or ".." in repo
            or repo.endswith(".git")):
        raise UsageError(f"{what} {repo!r} is not a Hub repository id; expected OWNER/NAME, "
                         "each 1 to 96 letters, digits, '-', '_' or '.', not beginning or "
                         "ending with '-' or '.', without '--' or '..', not ending in '.git'"
                         .lstrip())
    return repo


def check_revision(revision: str, what: str = "revision") -> str:
    """UsageError unless `revision` can name a branch, tag or commit."""
    if not revision or len(revision) > 255 or _BAD_REF.search(revision):
        raise UsageError(f"{what} {revision!r} cannot name a branch, tag or commit (no blanks, "
                         "control characters, '..', '~^:?*[\\', or a leading '-', '.' or '/')")
    return revision


def check_branch(revision: str, what: str = "revision") -> str:
    """check_revision, and UsageError for a commit id: a push commits to a branch."""
    if re.fullmatch(r"[0-9a-f]{40}", check_revision(revision, what)):
        raise UsageError(f"{what} {revision}: a commit id; a push commits to a branch (made "
                         "from main if new): give the branch's name")
    return revision


def default_pull_dir(repo: str, revision: str | None) -> Path:
    """``checkpoints/OWNER__NAME`` or ``checkpoints/OWNER__NAME@REV`` ('/' in REV becomes '_')."""
    name = repo.replace("/", "__")
    if revision:
        name += "@" + revision.replace("/", "_")
    return PULL_ROOT / name

