"""docs/architecture.md names the files each kind of change touches: every one must exist.

A path from the repository root (in backticks or in the layer picture) must exist, a
`<placeholder>` standing for at least one name (`fsc/model/<kind>.py`); a bare file name in
backticks (`chunk.py`, beside a folder the text names) must exist somewhere in the tree."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
FOLDERS = ("fsc", "kernels", "tests", "tools", "docs", "recipes")
ROOTED = re.compile(rf"(?<![\w/.~-])((?:{'|'.join(FOLDERS)})/[\w./<>-]*)")
BARE = re.compile(r"`([\w<>-]+\.(?:py|md|toml|yaml))`")


def named() -> list[str]:
    text = DOC.read_text()
    return sorted({p.rstrip(".") for p in ROOTED.findall(text)} | set(BARE.findall(text)))


def exists(name: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", name)
    if "/" in pattern:
        return any(ROOT.glob(pattern))
    return (ROOT / pattern).exists() or any(
        any((ROOT / folder).rglob(pattern)) for folder in FOLDERS)


def test_the_paths_are_found():
    names = named()
    assert {"fsc/decode/config.py", "fsc/store/migrations.py", "fsc/mixers/<kind>.py",
            "pyproject.toml"} <= set(names)
    assert not exists("fsc/no_such_module.py") and not exists("no_such_file.py")


@pytest.mark.parametrize("name", named())
def test_every_file_it_names_exists(name):
    assert exists(name), f"docs/architecture.md names {name}, which is not in the tree"
