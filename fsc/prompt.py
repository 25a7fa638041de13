"""The prompt of a decode: given as text, as a UTF-8 file (a long prompt: an argument is
limited to 128 KiB) or as token ids, one of them; or many prompts from a file (`--prompts`),
decoded in batches. Pure Python (no torch), so the CLI checks them first;
`fsc.loading.check_prompt_fits` checks their length before any weight is loaded."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from fsc.errors import UsageError
from fsc.text import printable

ONE = {  # what an option of one value is, said when it is given more than once
    "--prompt": "--prompt is one prompt; give several in a file, one a line, with --prompts FILE",
    "--prompt-file": "--prompt-file is one prompt; give several in a file, one a line, with "
                     "--prompts FILE",
    "--prompt-ids": "--prompt-ids is one prompt; give its ids once, comma-separated",
    "--prompts": "--prompts reads one file; put the prompts in one (e.g. cat A B > C)",
}


def once(option: str, values: list | None):
    """The value of `option` (one of `ONE`), given as a list of every time it was given (None
    or empty: not given). UsageError for more than one: click would keep the last one and
    drop the others unsaid."""
    if values and len(values) > 1:
        raise UsageError(f"{option} given {len(values)} times: {ONE[option]}")
    return values[0] if values else None


def given_prompt(prompt: str | None, prompt_file: Path | None, prompt_ids: str | None) -> str:
    """The text of --prompt or --prompt-file ("" when neither is given; --prompt-ids are parsed
    against the tokenizer later). UsageError for more than one prompt, or a file that cannot
    be read (see `read_prompt_file`)."""
    given = [name for name, value in (("--prompt", prompt), ("--prompt-ids", prompt_ids),
                                      ("--prompt-file", prompt_file)) if value is not None]
    if len(given) > 1:
        raise UsageError(f"give {given[0]} or {given[1]}, not both")
    if prompt_file is not None:
        return read_prompt_file(prompt_file)
    return prompt or ""


def read_prompt_file(path: Path) -> str:
    """The whole text of a regular UTF-8 file but for one final line end (LF or CR LF: an
    editor ends every file with one; llama.cpp's `--file` drops it too) and a byte order mark at
    its start (as `read_prompts`), so that a file holding `Once upon` is the prompt `--prompt
    "Once upon"` is; a prompt that ends in a newline is written with two. UsageError, one
    line, for a file that is missing, not a regular file (a FIFO is refused at once, never
    waited on), unreadable, not UTF-8 or empty. `-` reads standard input to its end (see
    `_file_text`)."""
    text = _file_text(path, "--prompt-file").removeprefix("\ufeff")
    return text.removesuffix("\n").removesuffix("\r") if text.endswith("\n") else text


BATCH = 8  # rows of --prompts decoded together unless --batch says
JSON_LINES = (".jsonl", ".ndjson")  # the suffixes of a file of JSON lines, a prompt an object
WRITTEN = ("recipe", "prompt_ids", "text", "token_ids", "stats")  # what a result adds


def given_prompts(path: Path | None, batch: int | None, no_cache: bool,
                  prompt: str | None, prompt_file: Path | None,
                  prompt_ids: str | None) -> list[tuple[str, dict]] | None:
    """The prompts of --prompts FILE (see `read_prompts`), None when it is not given.
    UsageError for --batch without --prompts, or --prompts with a single prompt's option or
    with --no-cache (batched decoding reads the cache)."""
    if path is None:
        if batch is not None:
            raise UsageError(f"--batch {batch} goes with --prompts FILE (a single prompt is "
                             "decoded alone)")
        return None
    for name, value in (("--prompt", prompt), ("--prompt-ids", prompt_ids),
                        ("--prompt-file", prompt_file)):
        if value is not None:
            raise UsageError(f"give --prompts or {name}, not both")
    if no_cache:
        raise UsageError("--no-cache decodes one prompt (--prompt): --prompts decodes in "
                         "batches through the cache")
    return read_prompts(path)


def read_prompts(path: Path) -> list[tuple[str, dict]]:
    """(where, record) of each prompt of a UTF-8 file, in its order; `where` is "line N" (or
    "item N" of a JSON array). A `.jsonl` (or `.ndjson`) file holds one JSON object a line,
    its prompt the string field `prompt`, its other fields kept for the result (none of them
    named as one of `WRITTEN`); a `.json` file holds an array of prompts, each a string or
    such an object (or, named .json, JSON lines); any other file holds one prompt a line, as it
    is (the line's end aside). Blank lines are skipped, and a UTF-8 byte order mark before the
    first line. `-` reads standard input, which has no suffix: its first character tells
    (`_piped_suffix`). UsageError, one line naming the line or item, for one that is not such
    a prompt; or for a file that holds no prompt or cannot be read as `read_prompt_file`
    says."""
    where = f"--prompts {printable(str(path), 120)}"
    text = _file_text(path, "--prompts").removeprefix("\ufeff")  # a BOM is no prompt's part
    suffix = _piped_suffix(text) if str(path) == "-" else path.suffix.lower()
    found = _array(text, where) if suffix == ".json" else None
    if found is None:
        found = []
        for n, line in enumerate(text.split("\n"), 1):  # (not splitlines: U+2028 ends none)
            line = line.removesuffix("\r")
            if line.strip():
                found.append((f"line {n}", _record(line, f"{where}: line {n}")
                              if suffix in (*JSON_LINES, ".json") else {"prompt": line}))
    if not found:
        raise UsageError(f"{where}: holds no prompt (only blank lines)")
    return found


def _piped_suffix(text: str) -> str:
    """The suffix standard input is read as, having none: `.json` where its text begins
    (blanks aside) with `[`, `.jsonl` with `{` (what `jq -c` writes), else none (a prompt a
    line; a prompt that begins with either is read from a file of another suffix)."""
    return {"[": ".json", "{": ".jsonl"}.get(text.lstrip()[:1], "")


def _array(text: str, where: str) -> list[tuple[str, dict]] | None:
    """The prompts of a .json file that is one JSON array (strings, or objects as a JSONL
    line's), numbered "item N"; None for a file that is not one JSON document (JSON lines,
    read a line at a time); UsageError for a document that is no array."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if isinstance(doc, dict) and "\n" not in text.strip():
        return None  # one JSON line
    if not isinstance(doc, list):
        raise UsageError(f"{where}: a .json file holds an array of prompts (strings, or objects "
                         'with a string "prompt"), or one JSON object a line')
    if not doc:
        raise UsageError(f"{where}: holds no prompt (an empty array)")
    for i, item in enumerate(doc, 1):
        if not isinstance(item, (str, dict)):
            raise UsageError(f'{where}: item {i} is neither a string nor an object with a '
                             'string "prompt" field')
    return [(f"item {i}", _checked({"prompt": item} if isinstance(item, str) else item,
                                   f"{where}: item {i}"))
            for i, item in enumerate(doc, 1)]


def _record(line: str, where: str) -> dict:
    """One line of a JSONL prompts file: an object with a string `prompt`."""
    try:
        record = json.loads(line)
    except ValueError as e:
        raise UsageError(f"{where} is not JSON ({getattr(e, 'msg', e)}); a .jsonl, .ndjson "
                         "or .json file holds JSON (a file of another suffix, a prompt a "
                         "line), as does standard input that begins with { or [") from None
    return _checked(record, where)


def _checked(record, where: str) -> dict:
    """A prompt's record: an object with a string `prompt`, none of its fields one fsc decode
    writes."""
    if not isinstance(record, dict) or not isinstance(record.get("prompt"), str):
        raise UsageError(f'{where} is not an object with a string "prompt" field')
    taken = [k for k in WRITTEN if k in record]
    if taken:
        raise UsageError(f'{where}: field "{taken[0]}" is one fsc decode writes '
                         f"({', '.join(WRITTEN)}); rename it")
    return record


def _file_text(path: Path, option: str) -> str:
    """The whole text of a regular, non-empty UTF-8 file given to `option` (see
    `read_prompt_file`); `-` is standard input, read to its end, refused where it is a
    terminal (a prompt typed there would be taken for a file's lines without a word)."""
    where = f"{option} {printable(str(path), 120)}"
    if str(path) == "-":
        return _decoded(_piped(where), where)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
            data = f.read() if regular else None
    except OSError as e:
        raise UsageError(f"{where}: cannot read ({e.strerror or e})") from None
    if data is None:
        raise UsageError(f"{where}: is not a regular file (a FIFO or a device)")
    return _decoded(data, where)


def _piped(where: str) -> bytes:
    """The whole of standard input (`where`: the option and `-`, as errors name it)."""
    stdin = sys.stdin
    if stdin is None or stdin.closed:
        raise UsageError(f"{where}: standard input is closed")
    if stdin.isatty():
        raise UsageError(f"{where}: reads standard input, a terminal here; pipe the text in "
                         f"({where} < FILE, or cat FILE | fsc ...)")
    try:
        return stdin.buffer.read()
    except OSError as e:
        raise UsageError(f"{where}: cannot read standard input ({e.strerror or e})") from None


def _decoded(data: bytes, where: str) -> str:
    """The UTF-8 text of a non-empty file's `data`."""
    if not data:
        raise UsageError(f"{where}: is empty")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{where}: not UTF-8 text ({e.reason} at byte {e.start})") from None
