"""Many prompts decoded together: the rows of one batch share one cache and every forward pass,
as `fsc decode --prompts`, genppl and the harness's generate_until decode.

Each row decodes as `fsc.decode.generate` decodes its prompt alone: the same greedy tokens
(tests/core/test_decode_batch.py, every mixer), its draws from its own seed (so a row's
samples never depend on its batch-mates), its own EOS. Prompts of one length are folded in
one pass; prompts of several lengths are folded one by one and their caches merged
(`fsc.model.cache.merge_rows`: fixed states as they are, KV caches right-aligned with per-row
padding the attention skips), so they share a batch too. A sliding-window attention's ring
cannot be aligned so: such a model decodes a batch per prompt length.
"""

from __future__ import annotations

import time
from collections import defaultdict

import torch

from fsc.decode import (
    DecodeConfig,
    DecodeResult,
    banned_ids,
    chunk_tokens,
    denoise,
    greedy_ids,
    picker,
    prefill,
)
from fsc.errors import UsageError
from fsc.model.cache import merge_rows
from fsc.model.lm import reading


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


def ragged_ok(model) -> bool:
    """Whether prompts of several lengths may share a batch: not with a sliding window."""
    return getattr(model.recipe.attention, "window", None) is None


@torch.inference_mode()
def generate_batch(model, tokenizer, prompts: list[list[int]], cfg: DecodeConfig,
                   device=None, seeds: list[int] | None = None,
                   batch: int = 8) -> list[DecodeResult]:
    """Up to `cfg.length` tokens after each prompt (`seeds[i]` its draws; default cfg.seed),
    at most `batch` rows decoded together. Each result's stats hold its own tokens, blocks,
    steps and forward passes (as `generate` counts them alone) and its batch's: `batch`,
    `batch_forward_passes`, the times and `tokens_per_s` (every row's tokens over the
    generation's time: the batch's throughput)."""
    cfg.check()
    if batch < 1:
        raise UsageError(f"--batch {batch} must be at least 1")
    if not prompts or any(not p for p in prompts):
        raise UsageError("a prompt is empty after tokenisation")
    if cfg.mode == "diffusion" and getattr(tokenizer, "mask_id", None) is None:
        raise UsageError(f"diffusion decoding needs a mask token, which the tokenizer "
                         f"({tokenizer.name}) lacks; decode with --mode ar")
    if not cfg.use_cache:
        raise UsageError("batched decoding reads the cache; decode one prompt with --no-cache")
    if cfg.mode == "ar" and model.recipe.logit_shift:  # its position i predicts token i + 1
        with reading(model, model.recipe.as_autoregressive()):
            return generate_batch(model, tokenizer, prompts, cfg, device, seeds, batch)
    device = device or model.embed.weight.device
    seeds = seeds or [cfg.seed] * len(prompts)
    results: list[DecodeResult | None] = [None] * len(prompts)
    for rows in batches(prompts, batch, ragged_ok(model)):
        outs, stats = _rows(model, tokenizer, [prompts[i] for i in rows], cfg, device,
                            [seeds[i] for i in rows])
        for i, out, st in zip(rows, outs, stats, strict=True):
            results[i] = DecodeResult(out, {**st, "prompt_tokens": len(prompts[i]),
                                            "tokens": len(out)})
    return results


def _rows(model, tokenizer, prompts: list[list[int]], cfg: DecodeConfig, device,
          seeds: list[int]) -> tuple[list[list[int]], list[dict]]:
    """The tokens and the stats of each row of one batch."""
    B, P = len(prompts), max(len(p) for p in prompts)
    G = 1 if cfg.mode == "ar" else cfg.G
    vocab = model.recipe.vocab_size
    banned = banned_ids(tokenizer, vocab)
    pick = picker(banned, vocab, cfg, device, seeds)
    eos = getattr(tokenizer, "eos_id", None)
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
    prompt_passes, used = passes, []
    t1 = time.perf_counter()
    outs: list[list[int]] = [[] for _ in range(B)]
    done = [False] * B
    blocks = [0] * B  # blocks each row decoded before it ended
    emitted = 0  # tokens each row still decoding holds
    while True:
        g = 1 if cfg.mode == "ar" else min(G, cfg.length - emitted)
        if cfg.mode == "ar":
            if cfg.temperature == 0:  # as `ar_picker`
                block = greedy_ids(logits, banned)[:, None]
            else:
                block = pick(logits[:, None])[0]
        else:
            start = torch.full((B, g), tokenizer.mask_id, dtype=torch.long, device=device)
            masked = torch.ones(B, g, dtype=torch.bool, device=device)

            def step(b):
                nonlocal passes
                passes += 1
                return model(b, cache)

            block = denoise(step, start, masked, cfg.steps, pick, cfg.threshold, used)
        emitted += g
        for b, ids in enumerate(block.tolist()):  # the block's ids: read back once a block
            if done[b]:
                continue
            blocks[b] += 1
            if eos is not None and eos in ids:  # a row ends at its EOS, kept
                ids, done[b] = ids[: ids.index(eos) + 1], True
            outs[b] += ids
            done[b] |= emitted >= cfg.length
        if all(done):
            break
        logits = model.fold(block, cache)[:, -1]  # (the last block is not folded)
        passes += 1
    t2 = time.perf_counter()
    prefill_s, generate_s = t1 - t0, t2 - t1
    made = sum(len(o) for o in outs)
    shared = {"mode": cfg.mode, "G": G, "K": 0 if cfg.mode == "ar" else cfg.steps,
              "policy": cfg.policy, "threshold": cfg.threshold, "cached": True, "graphs": False,
              "batch": B, "device": str(device), "batch_forward_passes": passes,
              "prompt_passes": prompt_passes, "prefill_s": prefill_s, "generate_s": generate_s,
              "seconds": prefill_s + generate_s,
              "prompt_tokens_per_s": (sum(map(len, prompts)) / prefill_s if prefill_s > 0
                                      else None),
              "tokens_per_s": made / generate_s if generate_s > 0 else float("inf")}
    def alone_passes(n: int) -> int:
        return -(-n // chunk_tokens(chunk, G, n))

    stats = []
    for b in range(B):  # a row's passes and steps: those of the blocks it decoded, as alone
        steps = sum(used[: blocks[b]])
        stats.append({**shared, "blocks": blocks[b], "steps_used": steps,
                      "steps_per_block": steps / blocks[b] if used else 0.0,
                      "forward_passes": alone_passes(len(prompts[b])) + steps + blocks[b] - 1})
    return outs, stats
