"""The cached decoder: `generate_batch` decodes prompts together, the rows of one batch sharing
one cache and every forward pass, and `generate` is it with one row (or, uncached, the
reference of fsc.decode.reference). Per batch (`_rows`): the prompts are prefilled (`prefill`,
in chunks), then each block is denoised (fsc.decode.denoise; one token a pass in AR mode), its
ids read back once, and folded into the cache. See the package's docstring (fsc.decode)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch

from fsc.decode.config import (
    PREFILL_CHUNK,
    DecodeConfig,
    DecodeResult,
    check_inputs,
    setting,
)
from fsc.decode.denoise import Steps
from fsc.decode.reference import generate_ref
from fsc.decode.sampler import banned_ids, picker
from fsc.errors import UsageError
from fsc.graphs import GraphedFold, GraphedStep, length_free, make_static
from fsc.graphs import usable as graphs_usable
from fsc.model.cache import merge_rows
from fsc.model.lm import read_as
from fsc.tokenizer import first_stop, stop_ids

WARMS_UP = ("cuda",)  # device types where the first decode of a model warms up (`warm_up`)
_warm: set[tuple] = set()  # (recipe hash, G, device) warmed up in this process
# called (tokens folded, of T) after each prefill pass, inside `folding`
_on_fold: ContextVar[Callable[[int, int], None] | None] = ContextVar("on_fold", default=None)


@contextmanager
def folding(report: Callable[[int, int], None]) -> Iterator[None]:
    """Within it, a prompt's prefill of more than one pass calls `report(tokens folded, of T)`
    after each, once it has run (the device synchronised): a long prompt's fold shows its
    progress. A prompt folded in one pass reports nothing, and waits for nothing."""
    token = _on_fold.set(report)
    try:
        yield
    finally:
        _on_fold.reset(token)


def chunk_tokens(chunk: int, G: int, T: int) -> int:
    """Tokens a prefill pass folds: `chunk` rounded down to whole blocks of G (at least one
    block), or all T when `chunk` is 0 or at least T."""
    return T if not chunk or chunk >= T else max(G, chunk // G * G)


def prefill(model, tokens, cache, chunk: int = PREFILL_CHUNK):
    """Fold a prompt `tokens` [B, T] into `cache` in passes of `chunk_tokens` tokens each (the
    cache as folding it in one pass leaves it); (the last token's logits [B, V], the passes)."""
    T = tokens.shape[1]
    n = chunk_tokens(chunk, cache.block_size, T)
    report = _on_fold.get() if n < T else None  # one pass: nothing to show, no wait for it
    for start in range(0, T, n):
        logits = model.fold_blocks(tokens[:, start : start + n], cache)
        if report is not None:
            synchronize(tokens.device)
            report(min(start + n, T), T)
    return logits, -(-T // n)


def warmed(model, G: int, device) -> float | None:
    """`warm_up`'s seconds where the first decode of `model` at G on `device` in this process
    needs one (CUDA), else None."""
    key = (model.recipe.recipe_hash, G, str(device))
    if torch.device(device).type not in WARMS_UP or key in _warm:
        return None
    _warm.add(key)
    return warm_up(model, G, device)


def warm_up(model, G: int, device) -> float:
    """Seconds of an untimed prefill, step and fold of one block of G tokens on a scratch
    cache: what the first decode of a model pays once in a process on CUDA (lazy
    initialisation, kernels compiled at their first call), kept out of the timed decode."""
    t0 = time.perf_counter()
    cache = model.empty_cache(1, 3 * G, device, block_size=G)
    tokens = torch.zeros(1, G, dtype=torch.long, device=device)
    model.fold_blocks(tokens, cache)
    model(tokens, cache)
    model.fold(tokens, cache)
    synchronize(device)
    return time.perf_counter() - t0


def synchronize(device) -> None:
    """Wait for the work queued on `device` (CUDA runs it apart from Python), so that a clock
    read next counts it: without it the prefill's kernels would be timed as the generation's."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@torch.inference_mode()  # no autograd bookkeeping at all: a few µs less per operation
def generate(model, tokenizer, prompt_ids: list[int], cfg: DecodeConfig,
             device=None) -> DecodeResult:
    """Generate up to `cfg.length` tokens after `prompt_ids`; stops early at EOS.

    Cached (the default), this is the batched decoder with one row
    (`generate_batch`, the one `fsc decode --prompts`, every eval task and the
    harness decode through). `use_cache=False` is its exactness reference: every step
    recomputes the whole prefix (`fsc.decode.reference`), and greedy decoding gives the same tokens.

    The stats time the prefill (`prefill_s`: the prompt folded into the cache,
    `prompt_tokens_per_s`) apart from the generation (`generate_s`, `tokens_per_s`: generated
    tokens alone); `seconds` is both. A warm-up (`warm_up`, on CUDA, once per model and G in a
    process) is timed apart as `warmup_s`, None when none was made."""
    cfg.check()
    check_inputs(model, tokenizer, prompt_ids, cfg)
    if cfg.use_cache:
        return generate_batch(model, tokenizer, [prompt_ids], cfg, device, [cfg.seed], 1)[0]
    return generate_ref(model, tokenizer, prompt_ids, cfg, device)


def batches(prompts: list[list[int]], size: int, ragged: bool = True) -> list[list[int]]:
    """The rows (indices into `prompts`) of each batch, at most `size` a batch: in order, or
    (not `ragged`) prompts of one length together, in the order of their first prompt."""
    if ragged:
        return [list(range(lo, min(lo + size, len(prompts))))
                for lo in range(0, len(prompts), size)]
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, p in enumerate(prompts):
        by_length[len(p)].append(i)
    return [rows[lo : lo + size] for rows in by_length.values()
            for lo in range(0, len(rows), size)]


def ragged_ok(recipe) -> bool:
    """Whether prompts of several lengths may share a batch (each folded alone, then merged):
    not with a sliding window."""
    return getattr(recipe.attention, "window", None) is None


@torch.inference_mode()
def generate_batch(model, tokenizer, prompts: list[list[int]], cfg: DecodeConfig,
                   device=None, seeds: list[int] | None = None, batch: int = 8,
                   finished: Callable[[list[int], list], None] | None = None
                   ) -> list[DecodeResult]:
    """Up to `cfg.length` tokens after each prompt (`seeds[i]` its draws; default cfg.seed),
    at most `batch` rows decoded together; `finished(rows, results)`, where given, is called
    as each batch ends, with its rows (indices into `prompts`) and the results so far (None
    where a row is yet to decode), so that a caller can write each batch as it ends. Each
    result's stats hold its own tokens, blocks, steps and forward passes (as `generate` counts
    them alone), why it ended (`stopped`: "eos" or "length"), how it decoded
    (`config.setting`) and its batch's: `batch`, `batch_forward_passes`, the times and
    `tokens_per_s` (every row's tokens over the generation's time: the batch's throughput)."""
    cfg.check()
    if batch < 1:
        raise UsageError(f"--batch {batch} must be at least 1")
    if not prompts or any(not p for p in prompts):
        raise UsageError("a prompt is empty after tokenisation")
    check_inputs(model, tokenizer, prompts[0], cfg)
    if not cfg.use_cache:
        raise UsageError("batched decoding reads the cache; decode one prompt with --no-cache")
    if cfg.mode == "ar" and model.recipe.logit_shift:  # its position i predicts token i + 1
        return generate_batch(read_as(model, 1, False), tokenizer, prompts, cfg, device, seeds,
                              batch, finished)
    device = device or model.embed.weight.device
    seeds = seeds or [cfg.seed] * len(prompts)
    results: list[DecodeResult | None] = [None] * len(prompts)
    warmup_s = warmed(model, 1 if cfg.mode == "ar" else cfg.G, device)
    for index, rows in enumerate(batches(prompts, batch, ragged_ok(model.recipe))):
        outs, stats = _rows(model, tokenizer, [prompts[i] for i in rows], cfg, device,
                            [seeds[i] for i in rows])
        for i, out, st in zip(rows, outs, stats, strict=True):
            results[i] = DecodeResult(out, {**st, "batch_index": index,
                                            "prompt_tokens": len(prompts[i]),
                                            "tokens": len(out), "warmup_s": warmup_s})
        warmup_s = None  # the first batch's rows paid it
        if finished is not None:
            finished(rows, results)
    return results


def _steps(model, cache, pick, cfg: DecodeConfig, replays: bool) -> Steps:
    """A diffusion decode's denoising steps, replayed from CUDA graphs where `replays`: the
    whole step (forward, pick, reveal) where the pick runs on the device; with the host's
    pick, only the forward pass."""
    def key():  # what a captured step reads besides its tokens: the length, unless length-free
        return None if length_free(model, cache) else cache.length

    whole = replays and pick.capturable
    forward = GraphedStep(model) if replays and not whole else model
    return Steps(lambda b: forward(b, cache), pick, cfg.steps, cfg.threshold,
                 graph_key=key if whole else None)


def _rows(model, tokenizer, prompts: list[list[int]], cfg: DecodeConfig, device,
          seeds: list[int]) -> tuple[list[list[int]], list[dict]]:
    """The tokens and the stats of each row of one batch."""
    B, P = len(prompts), max(len(p) for p in prompts)
    G = 1 if cfg.mode == "ar" else cfg.G
    vocab = model.recipe.vocab_size
    banned = banned_ids(tokenizer, vocab)
    pick = picker(banned, vocab, cfg, device, seeds, prompts)
    stops = stop_ids(tokenizer)
    t0 = time.perf_counter()
    capacity = P + cfg.length + G
    chunk = cfg.prefill_chunk
    if all(len(p) == P for p in prompts):  # folded together, a chunk a pass
        cache = model.empty_cache(B, capacity, device, block_size=G)
        logits, passes = prefill(model, torch.tensor(prompts, dtype=torch.long, device=device),
                                 cache, chunk)
    else:  # each alone, then one cache (right-aligned: fsc.model.cache.merge_rows)
        alone = [model.empty_cache(1, len(p), device, block_size=G) for p in prompts]
        folded = [prefill(model, torch.tensor([p], dtype=torch.long, device=device), c, chunk)
                  for p, c in zip(prompts, alone, strict=True)]
        logits = torch.cat([lg for lg, _ in folded])
        passes = sum(n for _, n in folded)
        cache = merge_rows(alone, capacity)
    prompt_passes = passes
    on = cfg.graphs and graphs_usable(device)
    # attention reading its length on the device: one capture of the fold, and of a step, for
    # every length (a length-free model)
    static = on and make_static(model, cache)
    folder = GraphedFold(model) if static else None
    # a capture pays for itself from its second replay on: a block's second step, or, where
    # one capture serves every block (a length-free model), the next block's first
    replays = on and cfg.mode == "diffusion" and (cfg.steps > 1 or static)
    steps = _steps(model, cache, pick, cfg, replays) if cfg.mode == "diffusion" else None
    synchronize(device)  # the prefill's time is its kernels', not their launches'
    t1 = time.perf_counter()
    outs: list[list[int]] = [[] for _ in range(B)]
    done = [False] * B
    stopped = ["length"] * B  # why each row ended: its EOS, or cfg.length
    blocks = [0] * B  # blocks each row decoded before it ended
    emitted = 0  # tokens each row still decoding holds
    while True:
        g = 1 if cfg.mode == "ar" else min(G, cfg.length - emitted)
        if cfg.mode == "ar":
            if cfg.temperature == 0:  # as `ar_picker`
                block = pick.greedy(logits)[:, None]
            else:
                block = pick(logits[:, None])[0]
        else:
            start = torch.full((B, g), tokenizer.mask_id, dtype=torch.long, device=device)
            block = steps.run(start, torch.ones(B, g, dtype=torch.bool, device=device), g)
            passes += max(steps.row_used[-1])  # the batch's steps: its slowest row's
        emitted += g
        pick.saw(block)
        for b, ids in enumerate(block.tolist()):  # the block's ids: read back once a block
            if done[b]:
                continue
            blocks[b] += 1
            end = first_stop(ids, stops)
            if end is not None:  # a row ends at its EOS, kept
                ids, done[b], stopped[b] = ids[: end + 1], True, "eos"
            outs[b] += ids
            done[b] |= emitted >= cfg.length
        if all(done):
            break
        logits = (model.fold(block, cache) if folder is None
                  else folder(block, cache))[:, -1]  # (the last block is not folded)
        passes += 1
    t2 = time.perf_counter()
    prefill_s, generate_s = t1 - t0, t2 - t1
    made = sum(len(o) for o in outs)
    shared = {**setting(cfg, G), "cached": True,
              "graphs": folder is not None or replays,
              "batch": B, "device": str(device), "batch_forward_passes": passes,
              "batch_prompt_passes": prompt_passes, "prefill_s": prefill_s,
              "generate_s": generate_s,
              "seconds": prefill_s + generate_s,
              "prompt_tokens_per_s": (sum(map(len, prompts)) / prefill_s if prefill_s > 0
                                      else None),
              "tokens_per_s": made / generate_s if generate_s > 0 else float("inf")}
    def alone_passes(n: int) -> int:
        return -(-n // chunk_tokens(chunk, G, n))

    used = steps.row_used if steps is not None else []
    stats = []
    for b in range(B):  # a row's passes and steps: those of the blocks it decoded, as alone
        taken = sum(row[b] for row in used[: blocks[b]])
        prompt = alone_passes(len(prompts[b]))
        stats.append({**shared, "blocks": blocks[b], "steps_used": taken,
                      "steps_per_block": taken / blocks[b] if used else 0.0,
                      "prompt_passes": prompt, "stopped": stopped[b],
                      "forward_passes": prompt + taken + blocks[b] - 1})
    return outs, stats
