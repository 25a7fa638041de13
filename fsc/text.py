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


def counted(n: int, noun: str) -> str:
    """'1 cell', '2 cells': a count and its noun, plural unless one."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
