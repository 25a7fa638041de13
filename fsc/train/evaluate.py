"""Evaluation: needle retrieval by length × depth, mqar by pairs × length, held-out loss.

Answers are decoded by the cached decoder: the prompt folded block by block into the cache,
each answer block filled by `fsc.decode.denoise` (K steps against the cache, the most
confident positions revealed on the even schedule; greedy) or, autoregressively, one token per
fold. After an answer block the true block is folded (teacher forcing), so the next answer of
an mqar sample is asked after the right history; an exact match over a whole passkey is the
same as with free decoding, since decoding agrees with the truth up to its first error.
Samples of one cell share a layout, so they are decoded together, `batch` at a time.

`score` runs a grid's cells (fsc.train.grid) in this process: `fsc eval` calls it here, and so
does each of its workers (fsc.scale.work).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import torch

from fsc.decode import banned_ids, denoise, sample
from fsc.loading import load_model
from fsc.train.data import DataOptions, open_data
from fsc.train.grid import EvalCell, EvalGrid, EvalSettings
from fsc.train.objective import Batch, sequence_losses
from fsc.train.tasks import Passkey, derive


def model_to_score(source: str, device, seed: int, ar: bool):
    """The model `fsc eval` scores: a checkpoint (or a recipe's seeded weights), decoded at
    G = 1 when `ar` asks it of a G > 1 checkpoint."""
    _, model = load_model(source, device=device, seed=seed)
    if ar and model.recipe.block_size != 1:
        model.recipe = model.recipe.model_copy(update={"block_size": 1})
    return model


def _picker(tokenizer, vocab: int):
    banned = banned_ids(tokenizer, vocab)

    def pick(logits):
        logits = logits.float().cpu().clone()
        logits[..., banned] = float("-inf")
        return sample(logits, 0.0, 1.0, None)

    return pick


@torch.no_grad()
def decode_answers(model, tokenizer, tokens: torch.Tensor, target: torch.Tensor, mode: str,
                   steps: int) -> torch.Tensor:
    """`tokens` [B, L] with the answers at the `target` [L] positions (the same in every row)
    replaced by what the cached decoder produces; see the module docstring."""
    B, L = tokens.shape
    device = tokens.device
    pick = _picker(tokenizer, model.recipe.vocab_size)
    G = 1 if mode == "ar" else model.recipe.block_size
    cache = model.empty_cache(B, L, device, block_size=G)
    out = tokens.clone()
    last = int(target.nonzero().max()) + 1
    if mode == "ar":
        logits = None
        for i in range(last):
            if target[i]:
                tok, _ = pick(logits[:, -1])
                out[:, i] = tok.to(device)
            logits = model.fold(tokens[:, i : i + 1], cache)
        return out
    for s in range(0, last, G):
        block, here = tokens[:, s : s + G], target[s : s + G]
        if here.any():
            masked = here[None].expand(B, -1).clone()
            out[:, s : s + G] = denoise(lambda b: model(b, cache), block.masked_fill(
                masked, tokenizer.mask_id), masked, steps, pick)
        if s + G < last:
            model.fold(block, cache)
    return out


def score(model, tokenizer, grid: EvalGrid, lengths, device,
          on_cell: Callable[[EvalCell], None] | None = None) -> list[EvalCell]:
    """The cells of `grid` at `lengths`, scored by `model` in this process, each handed to
    `on_cell` as it is done."""
    cells = []
    with torch.no_grad():
        if grid.task == "loss":
            measured = (m for n in lengths for m in heldout_loss(
                model, tokenizer, grid.data, n, grid.settings, grid.options, device))
        else:
            measured = (niah if grid.task == "niah" else mqar)(model, tokenizer, grid, lengths,
                                                               device)
        for m in measured:
            cells.append(grid.cell(m))
            if on_cell is not None:
                on_cell(cells[-1])
    return cells


def _ratio(length: int, settings: EvalSettings) -> float | None:
    return length / settings.train_len if settings.train_len else None


def niah(model, tokenizer, grid: EvalGrid, lengths, device) -> Iterator[dict]:
    """Passkey retrieval: a cell per (length, depth), exact match of the whole key."""
    settings = grid.settings
    for length in lengths:
        task = grid.prompts(tokenizer, length)
        for depth in grid.depths:
            samples = [task.sample(derive(settings.seed, length, round(depth * 1e6), i, 5), depth)
                       for i in range(settings.samples)]
            yield {"task": "niah", "length": length, "depth": depth,
                   "length_ratio": _ratio(length, settings),
                   **_cell(model, tokenizer, samples, settings, device)}


def mqar(model, tokenizer, grid: EvalGrid, lengths, device) -> Iterator[dict]:
    """Associative recall: a cell per (pairs, length); accuracy per query (each answer)."""
    settings = grid.settings
    for pairs in grid.pairs:
        for length in lengths:
            task = grid.prompts(tokenizer, length, pairs)
            samples = [task.sample(derive(settings.seed, length, pairs, i, 6))
                       for i in range(settings.samples)]
            yield {"task": "mqar", "length": length, "pairs": pairs,
                   "length_ratio": _ratio(length, settings),
                   **_cell(model, tokenizer, samples, settings, device)}


def _cell(model, tokenizer, samples, settings: EvalSettings, device) -> dict:
    """Decode `samples` (one layout) in batches and count exact matches, one per run of
    scored positions: a passkey's whole key, each of an mqar sample's answers."""
    target = torch.tensor(samples[0].target)
    score = torch.tensor(samples[0].score)
    starts = [i for i in range(len(score)) if score[i] and (i == 0 or not score[i - 1])]
    runs = [(a, next((j for j in range(a, len(score)) if not score[j]), len(score)))
            for a in starts]
    correct, right, t0, tokens = 0, 0, time.perf_counter(), 0
    for start in range(0, len(samples), settings.batch):
        chunk = samples[start : start + settings.batch]
        assert all(s.target == samples[0].target for s in chunk), "one layout per cell"
        ids = torch.tensor([s.ids for s in chunk], dtype=torch.long, device=device)
        got = decode_answers(model, tokenizer, ids, target, settings.mode, settings.steps).cpu()
        gold = ids.cpu()
        for a, b in runs:
            correct += int((got[:, a:b] == gold[:, a:b]).all(-1).sum())
        right += int((got == gold)[:, score].sum())
        tokens += ids.numel()
    seconds = time.perf_counter() - t0
    n = len(samples) * len(runs)
    return {"n": n, "correct": correct, "accuracy": correct / n,
            "token_accuracy": right / (len(samples) * int(score.sum())),
            "tokens_per_s": tokens / seconds if seconds > 0 else None, "seconds": seconds}


@torch.no_grad()
def heldout_loss(model, tokenizer, data: str, length: int, settings: EvalSettings,
                 options: DataOptions, device) -> list[dict]:
    """A loss cell's measures: the per-token loss on `samples` sequences of `data`, the
    frontier bound (one frontier and mask rate drawn per sequence, fixed by the seed; a
    Monte-Carlo estimate) for diffusion checkpoints, the next-token NLL for autoregressive
    ones."""
    G = model.recipe.block_size
    source = open_data(data, tokenizer, length, G, derive(settings.seed, 7), options,
                       option="--lengths")
    losses, t0, tokens = [], time.perf_counter(), 0
    for start in range(0, settings.samples, settings.batch):
        idx = range(start, min(start + settings.batch, settings.samples))
        batch = Batch.of([source.sample(i) for i in idx], device)
        gen = torch.Generator().manual_seed(derive(settings.seed, start, 8))
        losses += sequence_losses(model, settings.mode, batch, G, tokenizer.mask_id,
                                  gen).tolist()
        tokens += batch.tokens.numel()
    seconds = time.perf_counter() - t0
    n = len(losses)
    mean = sum(losses) / n
    se = (sum((x - mean) ** 2 for x in losses) / (n - 1) / n) ** 0.5 if n > 1 else None
    return [{"task": "loss", "length": length, "length_ratio": _ratio(length, settings),
             "n": n, "loss": mean, "loss_se": se, "distinct_sequences": getattr(source, "n", None),
             "tokens_per_s": tokens / seconds, "seconds": seconds}]


def quick_eval(trainer, n: int = 16) -> dict:
    """The in-loop eval (--eval-every): exact-match accuracy on `n` held-out samples of the
    training task at the training length, decoded by the cached decoder with K = G."""
    cfg, model = trainer.cfg, trainer.model
    task = trainer.data.task
    task = task.evaluated() if isinstance(task, Passkey) else task  # one layout per cell
    samples = [task.sample(derive(cfg.seed, i, 9)) for i in range(n)]
    mode = "ar" if cfg.objective == "ar" else "diffusion"
    settings = EvalSettings(mode, model.recipe.block_size, n, n, cfg.seed, cfg.seq_len)
    was_training = model.training
    model.eval()
    try:
        return {"eval_accuracy": _cell(model, trainer.tok, samples, settings,
                                       trainer.device)["accuracy"]}
    finally:
        model.train(was_training)
