"""Seeds derived from seeds: one number for each purpose (a sample, a draw, a reveal order), so
that streams never share draws and a run split by resumes draws the same."""

from __future__ import annotations

import hashlib


def derive(*parts: int) -> int:
    """A 63-bit seed from integers (a run's seed, a sample index, a purpose)."""
    text = ",".join(str(int(p)) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1
