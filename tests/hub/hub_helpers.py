"""Assertions shared by the hub tests."""

from __future__ import annotations

import hashlib
from pathlib import Path


def digest(directory: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under `directory` (hidden ones included)."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def assert_one_line_error(result, *secrets_: str) -> str:
    """A failed command: non-zero exit, one 'error:' line on stderr, no traceback, no secret."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for s in secrets_:
        assert s not in result.stdout + result.stderr
    return lines[0]
