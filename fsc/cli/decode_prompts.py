"""`fsc decode --prompts`: the prompts of a file decoded in batches, one JSON line a result on
stdout in the file's order, a summary on stderr."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import typer

from fsc.cli.common import print_plain, printable, say
from fsc.cli.decode_render import summary
from fsc.jsonsafe import plain
from fsc.text import counted


def decode_prompts(model, tok, recipe_name: str, records: list[tuple[str, dict]],
                   rows: list[list[int]], cfg, device: str, batch: int, weights: str) -> None:
    """Decode `rows` (the token ids of each record's prompt) `batch` at a time; row i draws
    from the seed `fsc.seeds.derive(cfg.seed, i)`, which its stats give, so that rows are
    independent of each other and of the batch they share. Each result is written as soon as
    it and every row before it have decoded, a batch's lines at once and flushed, a stop
    signal (Ctrl-C, SIGTERM) held until they are out: a run stopped midway keeps whole lines,
    the file's first, and says on stderr where it stopped. A result's `backends` are those
    its batch ran, `row` its i and `line` the file's line it was read from (None: an item of
    a JSON array), so that a reader finds its prompt whatever blank lines the file skipped."""
    from fsc import ops
    from fsc.decode import generate_batch
    from fsc.interrupts import StopSignals, exit_code, signum_of
    from fsc.seeds import derive

    seeds = [derive(cfg.seed, i) for i in range(len(rows))]
    backends: dict[int, dict] = {}
    written = 0

    def write(done: list[int], results) -> None:
        nonlocal written
        backends.update((i, dict(ran.backends)) for i in done)
        ran.backends.clear()  # the next batch's own
        lines, i = [], written
        while i < len(results) and results[i] is not None:
            (where, record), res = records[i], results[i]
            doc = {**record, "recipe": recipe_name, "prompt_ids": rows[i],
                   "text": tok.decode(res.token_ids), "token_ids": res.token_ids,
                   "stats": {**res.stats, "row": i,
                             "line": int(where[5:]) if where.startswith("line ") else None,
                             "seed": seeds[i], "backends": backends.pop(i),
                             "weights": weights}}
            lines.append(json.dumps(plain(doc), default=str, allow_nan=False) + "\n")
            i += 1
        with stops.held():  # whole lines, out of the buffer: a kill keeps them
            print_plain("".join(lines))
            sys.stdout.flush()
            written = i

    try:
        with StopSignals() as stops, ops.trace() as ran:
            results = generate_batch(model, tok, rows, cfg, device, seeds, batch, write)
    except KeyboardInterrupt as e:
        said = (f"the first {written} of {counted(len(rows), 'prompt')} written" if written
                else f"none of the {counted(len(rows), 'prompt')} written")
        if 0 < written < len(rows):
            said += f"; the rest, from {records[written][0]} on, were not"
        say(f"interrupted: {said}")
        raise typer.Exit(exit_code(signum_of(e))) from None
    say(summary(results, batch, cfg.seed))


def prompt_rows(tok, bos: bool, prompt: str, records: list[tuple[str, dict]] | None,
                prompts: Path | None, option: str | None = "--prompt") -> list[list[int]]:
    """The token ids of each prompt (each record's of --prompts, else the one prompt's, given
    to `option`, None when none was given), begun with BOS where `bos`
    (fsc.tokenizer.prompt_ids). UsageError, naming the prompt, for one that is not UTF-8 text
    (a lone surrogate: a JSON escape such as \\ud800, or an argument's byte that is not
    UTF-8), which no tokenizer reads, and for one that is no tokens where the tokenizer has no
    BOS to begin it (no prompt at all among them)."""
    from fsc.errors import UsageError
    from fsc.tokenizer import IdTokenizer, prompt_ids

    path = printable(str(prompts), 120)
    if records and isinstance(tok, IdTokenizer):  # (its own message offers --prompt-ids)
        raise UsageError(f"--prompts {path}: the model has no tokenizer to read its prompts' "
                         "text; give --tokenizer DIR")
    named = ([(f"--prompts {path}: {n}'s prompt", r["prompt"]) for n, r in records]
             if records else [(option or "--prompt", prompt)])
    rows, dropped = [], []
    for name, text in named:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            code = ord(text[e.start])  # an argument's byte as Python keeps it: U+DC80..U+DCFF
            what = (f"the byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF and not records
                    else f"the lone surrogate U+{code:04X}")  # (a file's: a JSON escape)
            raise UsageError(f"{name} is not UTF-8 text (character {e.start + 1} is {what})"
                             ) from None
        rows.append(prompt_ids(tok, text, bos))
        if not rows[-1] and option is None and not records:
            raise UsageError(f"no prompt given, and {tok.name} has no BOS to begin an empty "
                             "one: give --prompt TEXT, --prompt-file FILE or --prompt-ids IDS")
        if not rows[-1]:
            raise UsageError(f"{name} {'encodes to no tokens' if text else 'is empty'} and "
                             f"{tok.name} has no BOS to begin it")
        own = rows[-1][1:] if bos and rows[-1][:1] == [tok.bos_id] else rows[-1]
        if text and (back := tok.decode(own)) != text:  # a character it lacks, dropped
            dropped.append((name, back))
    if dropped:
        name, back = dropped[0]
        more = f" (and {counted(len(dropped) - 1, 'other prompt')})" if len(dropped) > 1 else ""
        say(f"note: {name}{more} holds text the tokenizer ({printable(tok.name, 80)}) does not "
            f"carry (a character it lacks is dropped): it reads back as "
            f"{printable(back[:60])!r}, and that is what the model is given")
    return rows


@contextmanager
def longest_named(records: list[tuple[str, dict]] | None, rows: list[list[int]],
                  prompts: Path | None):
    """Inside it, a UsageError about the longest prompt's length (fsc.loading.
    check_prompt_fits) names the line of --prompts that holds it; any other passes as it is."""
    from fsc.errors import UsageError

    try:
        yield
    except UsageError as e:
        i = max(range(len(rows)), key=lambda i: len(rows[i]))
        if not records or f"prompt's {len(rows[i])} tokens" not in str(e):
            raise
        raise type(e)(f"--prompts {printable(str(prompts), 120)}, {records[i][0]}: {e}") from None
