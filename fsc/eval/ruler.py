"""The RULER-style suite as `fsc eval` tasks (fsc.data.ruler makes the prompts): niah in
RULER's variants, variable tracking (vt), common- and frequent-word extraction (cwe, fwe), and
`ruler`: all of them in one run (niah in each variant, then vt, cwe and fwe).

A cell's answers are decoded by the cached decoder `batch` at a time
(fsc.eval.retrieval.decode_answers) freely: each answer block is folded as it was decoded, so
an answer of several blocks is the one a user would get. Each answer is scored as RULER scores
it: the fraction of the expected strings found in the decoded text (`score`, the mean over
samples), beside the samples that found them all (`correct`, `accuracy`). niah asked as
before (one key, no distractors, the filler haystack) is the passkey task of
fsc.eval.retrieval, scored by exact match (for one key the same as RULER's score).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import torch

from fsc.data.ruler import found, suite_task
from fsc.errors import UsageError
from fsc.eval import columns, retrieval
from fsc.eval.grid import EvalGrid, EvalSettings
from fsc.seeds import derive

STREAMS = {"niah": 12, "vt": 13, "cwe": 14, "fwe": 15}  # derive's purpose for each task's prompts
PARTS = (("niah", "single"), ("niah", "multikey"), ("niah", "multivalue"),
         ("niah", "multiquery"), ("vt", None), ("cwe", None), ("fwe", None))  # --task ruler
PLAIN = {**columns.PASSKEY, "needles": 1}  # the facts of a plain passkey cell


def parts(grid: EvalGrid) -> list[EvalGrid]:
    """The grids `grid` stands for: itself, or for --task ruler one a task and variant (niah
    single with one needle, whatever --needles says of the others)."""
    if grid.task != "ruler":
        return [grid]
    return [replace(grid, task=task, ruler=replace(
        grid.ruler, variant=variant or grid.ruler.variant,
        needles=None if variant == "single" else grid.ruler.needles))
        for task, variant in PARTS]


def cells_per_length(grid: EvalGrid) -> int:
    return sum(len(p.depths) if p.task == "niah" else 1 for p in parts(grid))


def plain(grid: EvalGrid) -> bool:
    """niah asked as before the suite: the passkey prompts of fsc.eval.retrieval."""
    r = grid.ruler
    needles = 1 if r.needles is None else r.needles
    return grid.task == "niah" and (r.variant, needles, r.distractors, r.haystack,
                                    r.template) == ("single", 1, 0, "filler", "fsc")


def prompts(grid: EvalGrid, tokenizer, length: int):
    """The generator of a cell's prompts at `length`; UsageError (naming --lengths or the
    option that does not fit) when they cannot be made."""
    if plain(grid):
        return retrieval.prompts(grid, tokenizer, length)
    return suite_task(grid.task, tokenizer, length, grid.G, grid.ruler, grid.digits,
                      option="--lengths")


def check(grid: EvalGrid, tokenizer) -> None:
    """UsageError, before any model is loaded, for prompts that cannot be made (a length too
    short, needles or hops that do not fit, an unknown variant or haystack), or --data."""
    if grid.data is not None:
        raise UsageError(f"--data is for --task loss or genppl; --task {grid.task} makes its "
                         "own prompts")
    for part in parts(grid):
        for n in grid.lengths:
            prompts(part, tokenizer, n)


def cells(grid: EvalGrid, tokenizer, length: int) -> Iterator[tuple[dict, list]]:
    """(what names the cell, its samples) for each cell of `grid` (one part) at `length`."""
    settings = grid.settings
    task = prompts(grid, tokenizer, length)
    facts = PLAIN if plain(grid) else task.facts()
    for depth in grid.depths if grid.task == "niah" else (None,):
        if plain(grid):
            samples = retrieval.niah_samples(grid, task, length, depth)
        elif depth is None:
            samples = [task.sample(derive(settings.seed, length, i, STREAMS[grid.task]))
                       for i in range(settings.samples)]
        else:
            samples = [task.sample(derive(settings.seed, length, round(depth * 1e6), i,
                                          STREAMS[grid.task]), depth)
                       for i in range(settings.samples)]
        yield ({"task": grid.task, "length": length, "depth": depth,
                "length_ratio": retrieval.ratio(length, settings), **facts}, samples)


def measure(model, tokenizer, grid: EvalGrid, lengths, device) -> Iterator[dict]:
    """A cell per length (niah: per length and depth, the asked needle's depth), for each
    part of the grid in turn."""
    for part in parts(grid):
        for length in lengths:
            for cell, samples in cells(part, tokenizer, length):
                if plain(part):  # exact match of the key
                    got = retrieval._cell(model, tokenizer, samples, part.settings, device)
                    yield {**cell, **got, "score": got["accuracy"]}
                else:
                    yield {**cell, **scored(model, tokenizer, samples, part.settings, device)}


def scored(model, tokenizer, samples, settings: EvalSettings, device) -> dict:
    """Decode `samples` (one layout) in batches; RULER's score, the samples that found every
    expected string, and the answer tokens decoded right."""
    target = torch.tensor(samples[0].target)
    total, complete, right, graded, answers = 0.0, 0, 0, 0, []
    t0, tokens = time.perf_counter(), 0
    for start in range(0, len(samples), settings.batch):
        chunk = samples[start : start + settings.batch]
        assert all(s.target == samples[0].target for s in chunk), "one layout per cell"
        ids = torch.tensor([s.ids for s in chunk], dtype=torch.long, device=device)
        got = retrieval.decode_answers(model, tokenizer, ids, target, settings.mode,
                                       settings.steps).cpu()
        for s, row in zip(chunk, got, strict=True):
            said = tokenizer.decode(row[target].tolist())
            share = found(said, s.answers)
            answers.append({"expected": list(s.answers), "decoded": said, "score": share})
            total += share
            complete += share == 1
            graded_here = torch.tensor(s.score)
            right += int((row[graded_here] == torch.tensor(s.ids)[graded_here]).sum())
            graded += int(graded_here.sum())
        tokens += ids.numel()
    seconds = time.perf_counter() - t0
    n = len(samples)
    return {"n": n, "correct": complete, "accuracy": complete / n, "score": total / n,
            "token_accuracy": right / graded if graded else None,
            "tokens_per_s": tokens / seconds if seconds > 0 else None, "seconds": seconds,
            "answers": retrieval.answers_text(answers)}
