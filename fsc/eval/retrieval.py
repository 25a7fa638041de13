"""Retrieval tasks: needle retrieval (niah) by length × depth, associative recall (mqar) by
pairs × length, copying (copy) by length.

Answers are decoded by the cached decoder, greedily. An answer after the whole prompt (niah,
copy, the RULER-style suite) is decoded as `fsc decode --prompts` decodes it
(`fsc.decode.generate_batch`: the prompt prefilled, each answer block filled by K steps
against the cache, then folded; a row ends at EOS). The answers of mqar sit between its
queries: each answer block is filled by `fsc.decode.denoise` (or, autoregressively, one token
per fold), then the true block is folded (teacher forcing), so the next answer is asked after
the right history. Samples of one cell share a layout, so they are decoded together, `batch`
at a time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import torch

from fsc.data.tasks import MQAR, Copy, Passkey
from fsc.decode import DecodeConfig, banned_ids, generate_batch
from fsc.decode.denoise import denoise
from fsc.decode.sampler import Picker
from fsc.errors import UsageError
from fsc.eval.grid import EvalGrid, EvalSettings
from fsc.seeds import derive


def prompts(grid: EvalGrid, tokenizer, length: int,
            pairs: int | None = None) -> Passkey | MQAR | Copy:
    """The task whose samples fill a niah or copy cell at `length`, or an mqar cell at `length`
    with `pairs`; UsageError (naming --lengths) when the length is too short for it."""
    if grid.task == "niah":
        return Passkey(tokenizer, length, grid.G, grid.digits, option="--lengths")
    if grid.task == "copy":
        return Copy(tokenizer, length, grid.G, option="--lengths")
    return MQAR(tokenizer, length, grid.G, pairs, option="--lengths")


def check(grid: EvalGrid, tokenizer) -> None:
    """UsageError, before any model is loaded, for a length too short for a cell's prompts,
    or for --data (these tasks make their own prompts)."""
    if grid.data is not None:
        raise UsageError(f"--data is for --task loss or genppl; --task {grid.task} makes its "
                         "own prompts")
    for n in grid.lengths:
        for p in (grid.pairs if grid.task == "mqar" else (None,)):
            prompts(grid, tokenizer, n, p)


@torch.no_grad()
def decode_answers(model, tokenizer, tokens: torch.Tensor, target: torch.Tensor, mode: str,
                   steps: int) -> torch.Tensor:
    """`tokens` [B, L] with the answers at the `target` [L] positions (the same in every row)
    replaced by what the cached decoder produces; see the module docstring: an answer after the
    whole prompt is decoded freely (each answer block folded as decoded, as a user gets it),
    answers between queries after the true blocks before them."""
    B, L = tokens.shape
    device = tokens.device
    G = 1 if mode == "ar" else model.recipe.block_size
    first = int(target.nonzero().min())
    if first > 0 and bool(target[first:].all()):  # one answer, after the whole prompt
        return _after_prompt(model, tokenizer, tokens, first, mode, G, steps)
    vocab = model.recipe.vocab_size  # greedy picks, on the device
    pick = Picker(banned_ids(tokenizer, vocab), vocab, 0.0, 1.0, "confidence", [0] * B, device)
    cache = model.empty_cache(B, L, device, block_size=G)
    out = tokens.clone()
    last = int(target.nonzero().max()) + 1
    if mode == "ar":  # the tokens before each target folded in one pass, then its pick
        at, logits = 0, None
        for i in target[:last].nonzero()[:, 0].tolist():
            if i > at:
                logits = model.fold_blocks(tokens[:, at:i], cache)
                at = i
            out[:, i] = pick(logits[:, None])[0][:, 0]
        return out
    s = 0
    while s < last:
        block, here = tokens[:, s : s + G], target[s : s + G]
        if not here.any():  # this block and the next ones up to a target's, folded in one pass
            e = s + G
            while e < last and not target[e : e + G].any():
                e += G
            model.fold_blocks(tokens[:, s:e], cache)
            s = e
            continue
        masked = here[None].expand(B, -1).clone()
        out[:, s : s + G] = denoise(lambda b: model(b, cache), block.masked_fill(
            masked, tokenizer.mask_id), masked, steps, pick)
        if s + G < last:
            model.fold(tokens[:, s : s + G], cache)
        s += G
    return out


def _after_prompt(model, tokenizer, tokens: torch.Tensor, first: int, mode: str, G: int,
                  steps: int) -> torch.Tensor:
    """`tokens` [B, L] with positions `first` on decoded after the prompt before them, by the
    decoder `fsc decode --prompts` runs (greedy, the pick on the device); after a row's EOS,
    EOS again."""
    B, L = tokens.shape
    cfg = DecodeConfig(length=L - first, G=G, steps=1 if mode == "ar" else steps, mode=mode,
                       sampler="device")
    rows = generate_batch(model, tokenizer, tokens[:, :first].tolist(), cfg, tokens.device,
                          batch=B)
    out = tokens.clone()
    eos = getattr(tokenizer, "eos_id", None)
    for b, row in enumerate(rows):
        ids = row.token_ids + [eos] * (L - first - len(row.token_ids))
        out[b, first:] = torch.tensor(ids, dtype=out.dtype)
    return out


def ratio(length: int, settings: EvalSettings) -> float | None:
    return length / settings.train_len if settings.train_len else None


def niah(model, tokenizer, grid: EvalGrid, lengths, device) -> Iterator[dict]:
    """Passkey retrieval: a cell per (length, depth), exact match of the whole key."""
    settings = grid.settings
    for length in lengths:
        task = prompts(grid, tokenizer, length)
        for depth in grid.depths:
            samples = niah_samples(grid, task, length, depth)
            yield {"task": "niah", "length": length, "depth": depth,
                   "length_ratio": ratio(length, settings),
                   **_cell(model, tokenizer, samples, settings, device)}


def niah_samples(grid: EvalGrid, task: Passkey, length: int, depth: float) -> list:
    """The samples of a niah cell (the same in `fsc eval` and its --export)."""
    return [task.sample(derive(grid.settings.seed, length, round(depth * 1e6), i, 5), depth)
            for i in range(grid.settings.samples)]


def mqar(model, tokenizer, grid: EvalGrid, lengths, device) -> Iterator[dict]:
    """Associative recall: a cell per (pairs, length); accuracy per query (each answer)."""
    settings = grid.settings
    for pairs in grid.pairs:
        for length in lengths:
            task = prompts(grid, tokenizer, length, pairs)
            samples = [task.sample(derive(settings.seed, length, pairs, i, 6))
                       for i in range(settings.samples)]
            yield {"task": "mqar", "length": length, "pairs": pairs,
                   "length_ratio": ratio(length, settings),
                   **_cell(model, tokenizer, samples, settings, device, queries=True)}


def copy(model, tokenizer, grid: EvalGrid, lengths, device) -> Iterator[dict]:
    """Copying: a cell per length, exact match of the whole copy (the copy task's letters are
    half the length, less the separator: longer lengths copy more)."""
    settings = grid.settings
    for length in lengths:
        task = prompts(grid, tokenizer, length)
        samples = [task.sample(derive(settings.seed, length, i, 16))
                   for i in range(settings.samples)]
        yield {"task": "copy", "length": length, "length_ratio": ratio(length, settings),
               **_cell(model, tokenizer, samples, settings, device)}


def _cell(model, tokenizer, samples, settings: EvalSettings, device,
          queries: bool = False) -> dict:
    """Decode `samples` (one layout) in batches and count exact matches, one per run of
    scored positions: a passkey's whole key, a copy's whole letters, each of an mqar sample's answers (`queries`: its
    answers' decoded texts a list, one a query, however many)."""
    target = torch.tensor(samples[0].target)
    score = torch.tensor(samples[0].score)
    starts = [i for i in range(len(score)) if score[i] and (i == 0 or not score[i - 1])]
    runs = [(a, next((j for j in range(a, len(score)) if not score[j]), len(score)))
            for a in starts]
    correct, right, t0, tokens, answers = 0, 0, time.perf_counter(), 0, []
    for start in range(0, len(samples), settings.batch):
        chunk = samples[start : start + settings.batch]
        assert all(s.target == samples[0].target for s in chunk), "one layout per cell"
        ids = torch.tensor([s.ids for s in chunk], dtype=torch.long, device=device)
        got = decode_answers(model, tokenizer, ids, target, settings.mode, settings.steps).cpu()
        gold = ids.cpu()
        hits = torch.stack([(got[:, a:b] == gold[:, a:b]).all(-1) for a, b in runs], -1)
        correct += int(hits.sum())
        right += int((got == gold)[:, score].sum())
        tokens += ids.numel()
        for row, want, hit in zip(got.tolist(), gold.tolist(), hits.tolist(), strict=True):
            said = [tokenizer.decode(row[a:b]) for a, b in runs]
            answers.append({"expected": [tokenizer.decode(want[a:b]) for a, b in runs],
                            "decoded": said if queries else said[0],
                            "score": sum(hit) / len(hit)})
    seconds = time.perf_counter() - t0
    n = len(samples) * len(runs)
    return {"n": n, "correct": correct, "accuracy": correct / n,
            "token_accuracy": right / (len(samples) * int(score.sum())),
            "tokens_per_s": tokens / seconds if seconds > 0 else None, "seconds": seconds,
            "answers": answers_text(answers)}


def answers_text(answers: list[dict]) -> str:
    """A cell's answers as its `answers` column holds them: JSON text, a list of one
    {expected, decoded, score} a sample (fsc.eval.columns.ANSWERS)."""
    return json.dumps(answers, ensure_ascii=False)


def quick_eval(trainer, n: int = 16) -> dict:
    """The in-loop eval (--eval-every): exact-match accuracy on `n` held-out samples of the
    training task at the training length, decoded by the cached decoder with K = G (a mix of
    tasks: the mean over its tasks of n / tasks samples each, at least 2)."""
    cfg, model = trainer.cfg, trainer.model
    tasks = getattr(trainer.data, "tasks", None) or [trainer.data.task]
    each = n if len(tasks) == 1 else max(2, n // len(tasks))
    mode = "ar" if cfg.objective == "ar" else "diffusion"
    settings = EvalSettings(mode, model.recipe.block_size, each, each, cfg.seed, cfg.seq_len)
    was_training = model.training
    model.eval()
    try:
        accuracies = []
        for j, task in enumerate(tasks):
            task = task.evaluated() if hasattr(task, "evaluated") else task  # one layout per cell
            which = (j,) if len(tasks) > 1 else ()
            samples = [task.sample(derive(cfg.seed, *which, i, 9)) for i in range(each)]
            accuracies.append(_cell(model, trainer.tok, samples, settings,
                                    trainer.device)["accuracy"])
        return {"eval_accuracy": sum(accuracies) / len(accuracies)}
    finally:
        model.train(was_training)
