"""Where fsc keeps and writes things: the store directory, and paths fsc is about to write,
checked before any work, so a bad path costs nothing and is refused in one line naming what
gave it (an option, or the file itself)."""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

from fsc.errors import UsageError


def unwritable(folder: Path) -> str | None:
    """Why no file can be created in `folder` (made and removed to find out: os.access says
    yes to root on read-only mounts and in /proc), or None when one can."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def _probe(folder: Path, what: str) -> None:
    """UsageError unless a file can really be created in `folder`."""
    if why := unwritable(folder):
        raise UsageError(f"{what}: cannot write in {folder} ({why})")


def output_file(path: Path, what: str, *, force: bool = True) -> Path:
    """A file about to be written (`what` names it in errors, e.g. "--out x.csv"): its folder
    must exist and take new files; an existing file is refused unless `force`."""
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{what}: folder {parent} does not exist")
    if path.is_dir():
        raise UsageError(f"{what}: is a directory")
    if path.exists() and not force:
        raise UsageError(f"{what}: exists; pass --force to replace it")
    _probe(parent, what)
    return path


def not_current_dir(path: Path, what: str) -> Path:
    """`path` made absolute (a symbolic link: the folder it names, which a rename would
    replace the link with); UsageError when it is the current directory or a folder that holds
    it: a checkpoint is built beside its destination and renamed into place whole, which would
    build it inside the folder, or leave the shell in a removed one."""
    full = Path(os.path.realpath(path) if os.path.islink(path) else os.path.abspath(path))
    real, here = os.path.realpath(full), os.path.realpath(os.curdir)
    if real == here:
        raise UsageError(f"{what}: the current directory; a checkpoint is moved into place as a "
                         "whole folder, so give a new folder's path (or run this from the "
                         "folder above)")
    if here.startswith(real.rstrip(os.sep) + os.sep):
        raise UsageError(f"{what}: holds the current directory; a checkpoint is moved into "
                         "place as a whole folder, so give a folder outside it (or run this "
                         "from elsewhere)")
    return full


def output_dir(path: Path, what: str, *, replace: bool = False, hint: str = "",
               whole: bool = False) -> Path:
    """A directory about to be created (missing parents too): it must be absent or empty (or,
    with `replace`, a directory to be replaced), and its nearest existing ancestor must be a
    folder that takes new files. `hint` ends the message for an existing one. With `whole` (a
    checkpoint, moved into place as one folder) it is made absolute and must not be, nor hold,
    the current directory (`not_current_dir`)."""
    if whole:
        path = not_current_dir(path, what)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{what}: a file, not a directory")
    if path.exists() and not (replace or not any(path.iterdir())):
        raise UsageError(f"{what}: already exists and is not {'a' if replace else 'an empty'} "
                         f"directory{hint}")
    ancestor = path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{what}: {ancestor} is not a folder")
    _probe(ancestor, what)
    return path


def held(folder: Path) -> bool:
    """Whether another process holds directory `folder`'s advisory lock now: fsc train holds its
    training directory's while it trains into it (fsc.train.run.sole_trainer), from before its
    first save until it ends, however it ends. A folder this process cannot open is none."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def store_dir(store: Path | None) -> Path:
    """The store directory: --store, then $FSC_STORE, then ./store."""
    if store is not None:
        return store
    env = os.environ.get("FSC_STORE")
    return Path(env) if env else Path("store")
