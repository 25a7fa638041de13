"""A checkpoint directory on disk: file names, checksums and atomic placement (no torch here).

A checkpoint is a flat directory. `checksums.sha256` lists the sha256 of every other file in
`sha256sum` format, so `sha256sum -c checksums.sha256` checks it without fsc. A directory is
never written in place: it is built in a temporary directory beside its destination and renamed
into place, so a reader sees either no checkpoint or a complete one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import fsc
from fsc.errors import CheckpointError
from fsc.paths import not_current_dir
from fsc.tokenizer import CARRIED_FILES


@dataclass
class CheckpointInfo:
    """A checkpoint directory as saved, verified, pushed or pulled: where it is, what it holds
    (`files`: name -> sha256), and `artifact_id` once the store recorded the action."""

    path: str
    name: str
    recipe_hash: str
    files: dict[str, str]

    def to_dict(self) -> dict:
        """The JSON document of a command (`--json`); artifact_id only once recorded."""
        doc = asdict(self)
        if doc.get("artifact_id", ...) is None:
            del doc["artifact_id"]
        return doc


@dataclass
class VerifiedCheckpoint(CheckpointInfo):
    weight_files: list[str]
    n_params: int
    artifact_id: str | None = None


@dataclass
class SavedCheckpoint(VerifiedCheckpoint):
    weight_bytes: int = 0
    seed: int | None = None  # seeded (untrained) weights; None for any other


RECIPE_FILE = "fsc_recipe.yaml"  # the recipe the weights belong to: the source of truth
CONFIG_FILE = "config.json"
CARD_FILE = "README.md"
CHECKSUMS_FILE = "checksums.sha256"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
REQUIRED_FILES = (RECIPE_FILE, CONFIG_FILE)
# What a checkpoint carries that its owner edits (the model card: its license, its prose, on the
# Hub's editor or here): saved, pushed and pulled, never checksummed nor verified. What the card
# states of the weights comes from config.json, which is.
OWNED_FILES = (CARD_FILE,)
FORMAT_VERSION = 1  # config.json's format_version: the layout this fsc writes and reads

_CHUNK = 1 << 20
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CHECKSUM_LINE = re.compile(r"([0-9a-f]{64}) [ *](.+)")


def shard_name(i: int, n: int) -> str:
    """File name of shard i (1-based) of n: ``model-00001-of-00003.safetensors``."""
    return f"model-{i:05d}-of-{n:05d}.safetensors"


def check_name(name: str, source: str) -> str:
    """A plain file name (no directories, no leading dot): names come from untrusted files."""
    if not _SAFE_NAME.fullmatch(name) or name == CHECKSUMS_FILE:
        raise CheckpointError(f"{source}: {name!r} is not an allowed checkpoint file name")
    return name


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def write_checksums(directory: Path, names: list[str]) -> dict[str, str]:
    """Hash `names` in `directory` and write `checksums.sha256`; return {name: sha256}."""
    files = {name: sha256_file(directory / name) for name in sorted(names)}
    text = "".join(f"{sha}  {name}\n" for name, sha in files.items())
    (directory / CHECKSUMS_FILE).write_text(text)
    return files


def read_checksums(directory: Path) -> dict[str, str]:
    """{name: sha256} from `checksums.sha256`, every line and name validated; a line of an
    `OWNED_FILES` file (an older save listed the card) is read and left out."""
    path = directory / CHECKSUMS_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: missing; every checkpoint lists its files' sha256 there")
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path}: cannot read ({e})") from None
    files: dict[str, str] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        m = _CHECKSUM_LINE.fullmatch(line)
        if m is None:
            raise CheckpointError(f"{path}: line {n} is not '<sha256>  <file name>'")
        sha, name = m.groups()
        if check_name(name, f"{path}: line {n}") in files:
            raise CheckpointError(f"{path}: {name} is listed twice")
        files[name] = sha
    files = {name: sha for name, sha in files.items() if name not in OWNED_FILES}
    for name in REQUIRED_FILES:
        if name not in files:
            raise CheckpointError(f"{path}: does not list {name}; not an fsc checkpoint")
    return files


def check_tokenizer_listed(directory: Path, files: dict[str, str]) -> None:
    """CheckpointError naming a tokenizer file (`CARRIED_FILES`) of a checkpoint that reads
    text with its own tokenizer.json, when `files` (its checksums) do not list it: one added
    by hand after the save would be read, but never verified, pushed nor pulled."""
    if not (directory / "tokenizer.json").is_file():
        return  # none of them is read
    for name in CARRIED_FILES:
        if name not in files and (directory / name).is_file():
            raise CheckpointError(
                f"{directory / name}: not listed in {CHECKSUMS_FILE} (added after the save?): "
                "fsc would read text with it but never verify, push nor pull it; list it "
                f"(cd {shlex.quote(str(directory))} && sha256sum {name} >> {CHECKSUMS_FILE}) "
                "or move it out of the checkpoint")


def verify_checksums(directory: Path, weights: bool = True) -> dict[str, str]:
    """Check every file listed in `checksums.sha256` before anything reads it; return the list.

    Files in the directory that the list does not name are ignored (never read), but for a
    tokenizer file, which is refused (`check_tokenizer_listed`). Without `weights`, the
    weight files (`*.safetensors`, gigabytes) are left to loading, which hashes them: what a
    command parses first (the recipe, config.json, the tokenizer, the index) is checked cheaply.
    """
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"{directory}: a file, not a checkpoint directory (give the "
                              "directory that holds it)")
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such checkpoint directory")
    files = read_checksums(directory)
    check_tokenizer_listed(directory, files)
    for name, expected in files.items():
        if not weights and name.endswith(".safetensors"):
            continue
        path = directory / name
        if not path.is_file():
            raise CheckpointError(f"{path}: missing (listed in {CHECKSUMS_FILE})")
        got = sha256_file(path)
        if got != expected:
            raise CheckpointError(
                f"{path}: sha256 {got[:12]}… does not match {expected[:12]}… "
                f"in {CHECKSUMS_FILE};"
                " the file is corrupt or was modified"
            )
    return files


def read_config(directory: Path) -> dict:
    """A checkpoint's config.json as a dict ({} when it is missing: loading reports that by
    the checksums). CheckpointError for a file that is not a JSON object, or one written in a
    later checkpoint format than this fsc reads."""
    path = Path(directory) / CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(
            f"{path}: not JSON ({e}); the checkpoint's config is damaged") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: not a JSON object; the checkpoint's config is damaged")
    version = config.get("format_version")
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format {version} (written by fsc "
            f"{config.get('fsc_version', '?')}), but fsc {fsc.__version__} reads format "
            f"{FORMAT_VERSION} and older; upgrade fsc to read it")
    return config


def refuse_existing(dest: Path, hint: str = "") -> None:
    """Raise unless `dest` is absent or an empty directory."""
    if dest.is_dir() and not any(dest.iterdir()):
        return
    if dest.exists() or dest.is_symlink():
        raise CheckpointError(f"{dest}: already exists and is not an empty directory; "
                              f"not overwriting it{hint}")


def temp_dir_beside(dest: Path, purpose: str) -> Path:
    """A fresh hidden directory in dest's parent (same file system: the final rename is atomic);
    UsageError when `dest` is, or holds, the current directory (fsc.paths.not_current_dir)."""
    dest = not_current_dir(dest, str(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{dest.name}.{purpose}-", dir=dest.parent))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def move_into_place(src: Path, dest: Path, replace: bool = False) -> None:
    """Rename the finished directory `src` to `dest`, with the permissions a plain mkdir gives.

    With `replace`, an existing `dest` is first renamed aside (into dest's parent) and removed
    only after the new directory is in place.
    """
    mask = _umask()
    for f in src.iterdir():
        f.chmod(0o666 & ~mask)
    src.chmod(0o777 & ~mask)  # mkdtemp made it private
    old = None
    if replace and dest.exists() and not (dest.is_dir() and not any(dest.iterdir())):
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent)) / "old"
        os.rename(dest, old)
    else:
        refuse_existing(dest)
    try:
        os.rename(src, dest)  # POSIX: replaces an empty directory, fails on a non-empty one
    except OSError as e:
        if old is not None:
            os.rename(old, dest)
            old.parent.rmdir()
        raise CheckpointError(f"{dest}: cannot move the new checkpoint into place ({e})") from None
    if old is not None:
        shutil.rmtree(old.parent, ignore_errors=True)
