"""User and stored text made safe to show in a terminal or a one-line error."""

from __future__ import annotations

import unicodedata


def printable(text: object, limit: int | None = 200, keep: str = "") -> str:
    """User or stored text made safe for a terminal: control characters (ANSI escapes,
    newlines unless in `keep`) shown as escapes, and at most `limit` characters. (Markup needs
    no escaping: the CLI's consoles read none.)"""
    text = str(text) if limit is None else str(text)[: limit + 1]
    s = "".join(repr(c)[1:-1] if unicodedata.category(c) in ("Cc", "Cf") and c not in keep else c
                for c in text)
    return s if limit is None or len(s) <= limit else s[: limit - 1] + "…"


def first_line(text: object) -> str:
    """The first non-blank line of `text` (an exception's message), stripped; "" if none."""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """'1 cell', '2 cells': a count and its noun, plural (`plural`, else noun + 's') unless
    one."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def named(noun: str, names: list[str]) -> str:
    """'run A', 'runs A, B': a noun, plural unless one, and the names."""
    return f"{noun if len(names) == 1 else noun + 's'} {', '.join(names)}"


BYTE_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def byte_unit(largest: float) -> tuple[str, int]:
    """The binary unit that shows `largest` bytes as a number of at least 1: (name, bytes)."""
    for name, size in BYTE_UNITS:
        if abs(largest) >= size:
            return name, size
    return "bytes", 1


def human_bytes(n: float) -> str:
    """A size in the binary unit that shows it, to three significant figures: '512 bytes',
    '883 KiB', '24.0 MiB', '1.50 GiB' (never '25165824 bytes' or '0.0 GiB')."""
    name, size = byte_unit(n)
    v = n / size
    if size == 1:
        return f"{int(n)} bytes"
    digits = 2 if abs(v) < 9.995 else 1 if abs(v) < 99.95 else 0
    return f"{v:,.{digits}f} {name}"


def utc_text(at, none: str = "–") -> str:
    """A stored time (a naive UTC datetime, as every TIMESTAMP column holds) as a reader
    reads it: to the second, said to be UTC; `none` for none. Text (a time `fsc query
    --write` put there) as it is."""
    if at is None:
        return none
    if not hasattr(at, "isoformat"):
        return str(at)
    return at.isoformat(sep=" ", timespec="seconds") + " UTC"
