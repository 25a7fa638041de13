"""The prompt of a decode: given as text, as a UTF-8 file (a long prompt: an argument is
limited to 128 KiB) or as token ids, one of them. Pure Python (no torch), so the CLI checks it
first; `fsc.loading.check_prompt_fits` checks its length before any weight is loaded."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fsc.errors import UsageError
from fsc.text import printable


def given_prompt(prompt: list[str] | None, prompt_file: Path | None,
                 prompt_ids: str | None) -> str:
    """The text of --prompt or --prompt-file ("" when neither is given; --prompt-ids are parsed
    against the tokenizer later). UsageError for more than one prompt, or a file that cannot
    be read (see `read_prompt_file`)."""
    if prompt is not None and len(prompt) > 1:
        raise UsageError(f"--prompt given {len(prompt)} times: fsc decode takes one prompt "
                         "(run it once for each)")
    given = [name for name, value in (("--prompt", prompt), ("--prompt-ids", prompt_ids),
                                      ("--prompt-file", prompt_file)) if value is not None]
    if len(given) > 1:
        raise UsageError(f"give {given[0]} or {given[1]}, not both")
    if prompt_file is not None:
        return read_prompt_file(prompt_file)
    return prompt[0] if prompt else ""


def read_prompt_file(path: Path) -> str:
    """The whole text of a regular UTF-8 file, as it is (a final newline is part of the
    prompt). UsageError, one line, for a file that is missing, not a regular file (a FIFO is
    refused at once, never waited on), unreadable, not UTF-8 or empty."""
    where = f"--prompt-file {printable(str(path), 120)}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
            data = f.read() if regular else None
    except OSError as e:
        raise UsageError(f"{where}: cannot read ({e.strerror or e})") from None
    if data is None:
        raise UsageError(f"{where}: is not a regular file (a FIFO or a device)")
    if not data:
        raise UsageError(f"{where}: is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
