"""Decoding: block diffusion (G tokens, K denoising steps, then a fold) and the AR baseline.

Block diffusion, per block: start from G mask tokens; each of the K steps is one forward pass of
the block against the cache (the cache is not changed); after each step some masked positions
are revealed, then one fold writes the finished block into the cache. Which ones: the policy
ranks the masked positions (`confidence`: the probability of the token sampled there;
`margin`: top-1 minus top-2 probability; `entropy`: lowest entropy first; `random`: a seeded
random order, MDLM's, from a stream of its own, so that where the order cannot matter (K = 1)
the samples are every other policy's), and the best are revealed on an even schedule over the
K steps. With a threshold τ (adaptive parallel decoding, Fast-dLLM) a step reveals every masked
position whose sampled token is at least τ probable, and at least as many, in the policy's
order, as finishing the block in the steps left needs (one a step at K = G), so the steps
adapt. Tokens are sampled in float64: categorical sampling in low precision lowers entropy
(arXiv 2409.02908). `use_cache=False` recomputes the whole prefix with the block-causal
forward at every step instead (the uncached reference and speed baseline).

Autoregressive (G = 1): one forward per token that both folds the last token and predicts the
next one. The last block generated is not folded, as nothing reads it.

The cached decoder is `generate_batch`: prompts decoded together, the rows of one batch sharing
one cache and every forward pass. `fsc decode` (one prompt: `generate`, a batch of one), `fsc
decode --prompts`, the eval tasks (genppl; niah and the RULER-style suite through
fsc.eval.retrieval) and the harness's generate_until all decode through it. Each row decodes
as its prompt would alone: the same greedy tokens as alone and as the uncached reference
(tests/core/test_decode_batch.py, every mixer), its draws from its own seed (so a row's samples
never depend on its batch-mates), its own EOS. Prompts of one length are folded together;
prompts of several lengths are folded one by one and their caches merged
(`fsc.model.cache.merge_rows`: fixed states as they are, KV caches right-aligned with per-row
padding the attention skips), so they share a batch too. A sliding-window attention's ring
cannot be aligned so: such a model decodes a batch per prompt length. On CUDA the K steps of a
block replay one captured graph: the forward pass, the device pick and the reveal together
(fsc.denoise.Steps, fsc.graphs), and the first decode of a model in a process
warms up first (`warmed`).

The prompt is folded by `prefill`: in passes of at most `prefill_chunk` tokens (whole blocks,
`LM.fold_blocks` each), so that a long prompt's activations, and attention's mask of which
token reads which, are those of one chunk against the prefix, not of the whole prompt.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import torch

from fsc.blocks import MODES, POLICIES, check_block
from fsc.denoise import Steps
from fsc.errors import UsageError
from fsc.graphs import GraphedFold, GraphedStep, length_free, make_static
from fsc.graphs import usable as graphs_usable
from fsc.model.cache import merge_rows
from fsc.model.lm import read_as
from fsc.sampler import HostPicker, Picker

SAMPLERS = ("auto", "host", "device")  # where the pick runs (`picker`)
PREFILL_CHUNK = 4096  # prompt tokens folded in one pass (`prefill`; 0: the whole prompt)
WARMS_UP = ("cuda",)  # device types where the first decode of a model warms up (`warm_up`)
_warm: set[tuple] = set()  # (recipe hash, G, device) warmed up in this process


@dataclass
class DecodeConfig:
    length: int
    G: int
    steps: int
    mode: str = "diffusion"  # "diffusion" | "ar"
    temperature: float = 0.0
    top_p: float = 1.0
    threshold: float | None = None
    seed: int = 0
    use_cache: bool = True
    policy: str = "confidence"
    graphs: bool = True  # on CUDA, steps and folds replay captured graphs (fsc.denoise, fsc.graphs)
    sampler: str = "auto"  # the pick: on the logits' device (CUDA) or the host (`picker`)
    prefill_chunk: int = PREFILL_CHUNK  # prompt tokens folded in one pass (0: all)

    def check(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.length < 1:
            raise UsageError(f"length {self.length} must be at least 1")
        if self.mode == "diffusion":
            check_block(self.G, self.steps)
        if self.temperature < 0:
            raise UsageError(f"temperature {self.temperature} must be >= 0")
        if not 0 < self.top_p <= 1:
            raise UsageError(f"top_p {self.top_p} must be in (0, 1]")
        if self.threshold is not None and not 0 < self.threshold <= 1:
            raise UsageError(f"threshold {self.threshold} must be in (0, 1]")
        if self.sampler not in SAMPLERS:
            raise UsageError(f"sampler {self.sampler!r} is not one of {', '.join(SAMPLERS)}")
        if self.policy not in POLICIES:
            raise UsageError(f"policy {self.policy!r} is not one of {', '.join(POLICIES)}")
        if self.prefill_chunk < 0:
            raise UsageError(f"--prefill-chunk {self.prefill_chunk} must be >= 0")


@dataclass
class DecodeResult:
    token_ids: list[int]
    stats: dict = field(default_factory=dict)


def chunk_tokens(chunk: int, G: int, T: int) -> int:
    """Tokens a prefill pass folds: `chunk` rounded down to whole blocks of G (at least one
    block), or all T when `chunk` is 0 or at least T."""
    return T if not chunk or chunk >= T else max(G, chunk // G * G)


def prefill(model, tokens, cache, chunk: int = PREFILL_CHUNK):
    """Fold a prompt `tokens` [B, T] into `cache` in passes of `chunk_tokens` tokens each (the
    cache as folding it in one pass leaves it); (the last token's logits [B, V], the passes)."""
    T = tokens.shape[1]
    n = chunk_tokens(chunk, cache.block_size, T)
    for start in range(0, T, n):
        logits = model.fold_blocks(tokens[:, start : start + n], cache)
    return logits, -(-T // n)


def picker(banned: list[int], vocab: int, cfg: DecodeConfig, device,
           seeds: list[int] | None = None):
    """pick(logits [B, n, V]) -> (tokens, confidences, priorities), each [B, n] on `device`,
    row b drawing from seed `seeds[b]` (default: cfg.seed, one row): the device picker
    (fsc.sampler.Picker: nothing of [n, V] leaves the device) where `cfg.sampler` asks for it
    (auto: on CUDA), else the host reference (fsc.sampler.HostPicker: `pick_ref` a row), which
    the CPU keeps (its draws are the ones recorded so far). Either also gives a pick's draws
    and its choice apart (`draw`, `choose`: fsc.denoise captures the choice) and the greedy
    token alone (`greedy`: autoregressive decoding)."""
    device = torch.device(device)
    seeds = seeds or [cfg.seed]
    on_device = cfg.sampler == "device" or (cfg.sampler == "auto" and device.type == "cuda")
    if on_device:
        return Picker(banned, vocab, cfg.temperature, cfg.top_p, cfg.policy, seeds, device)
    return HostPicker(banned, vocab, cfg.temperature, cfg.top_p, cfg.policy, seeds, device)


def ar_picker(pick, temperature: float):
    """next(logits [V]) -> the next token of autoregressive decoding: greedy at temperature 0
    (`pick.greedy`), else `pick`'s sample."""
    if temperature > 0:
        return lambda logits: int(pick(logits[None, None])[0][0, 0])
    return lambda logits: int(pick.greedy(logits))


class _Reference:
    """The forward passes of the uncached reference decode: every step recomputes the whole
    prefix with the block-causal forward (no cache; `generate(..., use_cache=False)`)."""

    def __init__(self, model, ids: list[int], G: int, device):
        self.model, self.device = model, device
        self.ids: list[int] = []
        self.blocks: list[int] = []
        self.passes = 0
        for start in range(0, len(ids), G):
            self.commit(ids[start : start + G])

    def _t(self, ids):
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    def step(self, block):
        """Logits [1, g, V] of the frontier block [1, g] after the prefix."""
        self.passes += 1
        x = torch.cat([self._t(self.ids), block], dim=1) if self.ids else block
        return self.model.forward_blockwise(x, self.blocks + [block.shape[1]])[:, -block.shape[1] :]

    def commit(self, block: list[int]) -> None:
        """The finished block joins the prefix (recomputed at the next step)."""
        self.ids += block
        self.blocks.append(len(block))

    def ar_logits(self):
        """Logits [V] predicting the next token after everything committed."""
        self.passes += 1
        return self.model.forward_blockwise(self._t(self.ids), self.blocks)[0, -1]


def _check_inputs(model, tokenizer, prompt_ids: list[int]) -> None:
    vocab = model.recipe.vocab_size
    if tokenizer.vocab_size > vocab:
        raise UsageError(
            f"tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is {vocab}"
        )
    if not prompt_ids:
        raise UsageError("the prompt is empty after tokenisation")


def banned_ids(tokenizer, vocab: int) -> list[int]:
    """Ids decoding never produces: the tokenizer's specials and ids past its vocabulary."""
    return ([i for i in tokenizer.special_ids if i is not None]
            + list(range(tokenizer.vocab_size, vocab)))


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
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


@torch.inference_mode()  # no autograd bookkeeping at all: a few µs less per operation
def generate(model, tokenizer, prompt_ids: list[int], cfg: DecodeConfig,
             device=None) -> DecodeResult:
    """Generate up to `cfg.length` tokens after `prompt_ids`; stops early at EOS.

    Cached (the default), this is the batched decoder with one row
    (`generate_batch`, the one `fsc decode --prompts`, every eval task and the
    harness decode through). `use_cache=False` is its exactness reference: every step
    recomputes the whole prefix (`_Reference`), and greedy decoding gives the same tokens.

    The stats time the prefill (`prefill_s`: the prompt folded into the cache,
    `prompt_tokens_per_s`) apart from the generation (`generate_s`, `tokens_per_s`: generated
    tokens alone); `seconds` is both. A warm-up (`warm_up`, on CUDA, once per model and G in a
    process) is timed apart as `warmup_s`, None when none was made."""
    cfg.check()
    _check_inputs(model, tokenizer, prompt_ids)
    if cfg.use_cache:
        return generate_batch(model, tokenizer, [prompt_ids], cfg, device, [cfg.seed], 1)[0]
    if cfg.mode == "ar" and model.recipe.logit_shift:  # its position i predicts token i + 1
        return generate(read_as(model, 1, False), tokenizer, prompt_ids, cfg, device)
    if cfg.mode == "diffusion" and getattr(tokenizer, "mask_id", None) is None:
        raise UsageError(f"diffusion decoding needs a mask token, which the tokenizer "
                         f"({tokenizer.name}) lacks; decode with --mode ar")
    device = device or model.embed.weight.device
    vocab = model.recipe.vocab_size
    G = 1 if cfg.mode == "ar" else cfg.G
    banned = banned_ids(tokenizer, vocab)
    t0 = time.perf_counter()
    run = _Reference(model, prompt_ids, G, device)
    t1 = time.perf_counter()
    out: list[int] = []
    n_blocks = 0
    eos = getattr(tokenizer, "eos_id", None)
    pick = picker(banned, vocab, cfg, device)
    next_token = ar_picker(pick, cfg.temperature)
    steps = Steps(run.step, pick, cfg.steps, cfg.threshold)  # (and the steps each block took)

    while True:
        if cfg.mode == "ar":
            block = [next_token(run.ar_logits())]
        else:  # one block of g masked positions filled in at most K steps
            g = min(G, cfg.length - len(out))
            block = steps.run(torch.full((1, g), tokenizer.mask_id, dtype=torch.long,
                                         device=device),
                              torch.ones(1, g, dtype=torch.bool, device=device), g)[0].tolist()
        n_blocks += 1
        out += block
        if eos is not None and eos in block:
            out = out[: out.index(eos) + 1]
            break
        if len(out) >= cfg.length:
            break
        run.commit(block)
    t2 = time.perf_counter()
    prefill_s, generate_s = t1 - t0, t2 - t1
    stats = {
        "mode": cfg.mode,
        "G": G,
        "K": 0 if cfg.mode == "ar" else cfg.steps,  # ar: no denoising steps, one fold per token
        "policy": cfg.policy,
        "threshold": cfg.threshold,
        "steps_used": sum(steps.used),
        "steps_per_block": sum(steps.used) / len(steps.used) if steps.used else 0.0,
        "cached": False,
        "graphs": False,
        "prompt_tokens": len(prompt_ids),
        "tokens": len(out),
        "blocks": n_blocks,
        "forward_passes": run.passes,
        "prompt_passes": 0,  # every step recomputes the prompt instead
        "device": str(device),
        "warmup_s": None,
        "prefill_s": prefill_s,
        "generate_s": generate_s,
        "seconds": prefill_s + generate_s,
        "prompt_tokens_per_s": None,  # the prompt is not folded ahead
        "tokens_per_s": len(out) / generate_s if generate_s > 0 else float("inf"),
    }
    return DecodeResult(out, stats)


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
    _check_inputs(model, tokenizer, prompts[0])
    if cfg.mode == "diffusion" and getattr(tokenizer, "mask_id", None) is None:
        raise UsageError(f"diffusion decoding needs a mask token, which the tokenizer "
                         f"({tokenizer.name}) lacks; decode with --mode ar")
    if not cfg.use_cache:
        raise UsageError("batched decoding reads the cache; decode one prompt with --no-cache")
    if cfg.mode == "ar" and model.recipe.logit_shift:  # its position i predicts token i + 1
        return generate_batch(read_as(model, 1, False), tokenizer, prompts, cfg, device, seeds,
                              batch)
    device = device or model.embed.weight.device
    seeds = seeds or [cfg.seed] * len(prompts)
    results: list[DecodeResult | None] = [None] * len(prompts)
    warmup_s = warmed(model, 1 if cfg.mode == "ar" else cfg.G, device)
    for rows in batches(prompts, batch, ragged_ok(model)):
        outs, stats = _rows(model, tokenizer, [prompts[i] for i in rows], cfg, device,
                            [seeds[i] for i in rows])
        for i, out, st in zip(rows, outs, stats, strict=True):
            results[i] = DecodeResult(out, {**st, "prompt_tokens": len(prompts[i]),
                                            "tokens": len(out), "warmup_s": warmup_s})
        warmup_s = None  # the first batch's rows paid it
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
    t1 = time.perf_counter()
    outs: list[list[int]] = [[] for _ in range(B)]
    done = [False] * B
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
            passes += steps.used[-1]
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
        logits = (model.fold(block, cache) if folder is None
                  else folder(block, cache))[:, -1]  # (the last block is not folded)
        passes += 1
    t2 = time.perf_counter()
    prefill_s, generate_s = t1 - t0, t2 - t1
    made = sum(len(o) for o in outs)
    shared = {"mode": cfg.mode, "G": G, "K": 0 if cfg.mode == "ar" else cfg.steps,
              "policy": cfg.policy, "threshold": cfg.threshold, "cached": True,
              "graphs": folder is not None or replays,
              "batch": B, "device": str(device), "batch_forward_passes": passes,
              "prompt_passes": prompt_passes, "prefill_s": prefill_s, "generate_s": generate_s,
              "seconds": prefill_s + generate_s,
              "prompt_tokens_per_s": (sum(map(len, prompts)) / prefill_s if prefill_s > 0
                                      else None),
              "tokens_per_s": made / generate_s if generate_s > 0 else float("inf")}
    def alone_passes(n: int) -> int:
        return -(-n // chunk_tokens(chunk, G, n))

    used = steps.used if steps is not None else []
    stats = []
    for b in range(B):  # a row's passes and steps: those of the blocks it decoded, as alone
        steps = sum(used[: blocks[b]])
        stats.append({**shared, "blocks": blocks[b], "steps_used": steps,
                      "steps_per_block": steps / blocks[b] if used else 0.0,
                      "forward_passes": alone_passes(len(prompts[b])) + steps + blocks[b] - 1})
    return outs, stats
