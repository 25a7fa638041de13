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
order, as finishing the block in the steps left needs (one a step at K = G), so the steps adapt. Tokens are sampled
in float64: categorical sampling in low precision lowers entropy (arXiv 2409.02908). `use_cache=False` recomputes the whole prefix with
the block-causal forward at every step instead (the uncached reference and speed baseline).

Autoregressive (G = 1): one forward per token that both folds the last token and predicts the
next one. The prompt is folded in one pass (`LM.fold_blocks`); the last block generated is not
folded, as nothing reads it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch

from fsc.blocks import blocks_of, check_block
from fsc.errors import UsageError
from fsc.graphs import GraphedStep, capturable
from fsc.graphs import usable as graphs_usable
from fsc.model.lm import reading
from fsc.seeds import derive

POLICIES = ("confidence", "random", "margin", "entropy")
ORDER_STREAM = 1  # derive(seed, ORDER_STREAM): the random order's seed, apart from the samples'
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
    graphs: bool = True  # on CUDA, a block's steps replay one captured graph (fsc.graphs)

    def check(self) -> None:
        if self.mode not in ("diffusion", "ar"):
            raise UsageError(f"mode {self.mode!r} is not one of diffusion, ar")
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
        if self.policy not in POLICIES:
            raise UsageError(f"policy {self.policy!r} is not one of {', '.join(POLICIES)}")


@dataclass
class DecodeResult:
    token_ids: list[int]
    stats: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def even_schedule(g: int, steps: int) -> list[int]:
    """How many positions each of `steps` steps reveals so that all g are revealed."""
    return [(k + 1) * g // steps - k * g // steps for k in range(steps)]


def distribution(logits, temperature: float, top_p: float):
    """What each row of `logits` [n, V] samples from, in float64: softmax at `temperature`
    (greedy, 0: at 1), cut to the smallest top-`top_p` set and renormalised."""
    logits = logits.double()
    probs = torch.softmax(logits / temperature if temperature > 0 else logits, dim=-1)
    if temperature > 0 and top_p < 1:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < top_p  # smallest prefix reaching top_p
        sorted_p = sorted_p * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def sample(logits, temperature: float, top_p: float, generator):
    """Tokens and their confidences (the probability of each, float64) for each row of
    `logits` [n, V] (on CPU); the draw is made in float64."""
    probs = distribution(logits, temperature, top_p)
    if temperature == 0:
        conf, tok = probs.max(dim=-1)
        return tok, conf
    tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tok, probs.gather(-1, tok[:, None]).squeeze(-1)


def ranking(probs, conf, policy: str, order):
    """Each row's priority [n] under `policy` (higher is revealed first), from the
    distribution `probs` [n, V] it sampled from and the sampled tokens' probabilities; `random`
    draws from `order`, a generator of its own (never the samples')."""
    if policy == "confidence":
        return conf
    if policy == "margin":
        top = probs.topk(2, dim=-1).values
        return top[:, 0] - top[:, 1]
    if policy == "entropy":
        return (probs * probs.clamp_min(1e-300).log()).sum(-1)  # -H: low entropy first
    return torch.rand(probs.shape[0], generator=order, dtype=torch.float64)


def picker(banned: list[int], temperature: float, top_p: float, policy: str, generator,
           order):
    """pick(logits [n, V]) -> (tokens, confidences, priorities): a sample from each row (drawn
    from `generator`) with the `banned` ids never drawn, and the policy's priority of each
    position (`random`: drawn from `order`)."""

    def pick(logits):
        logits = logits.float().cpu().clone()
        logits[..., banned] = float("-inf")
        probs = distribution(logits, temperature, top_p)
        if temperature == 0:
            conf, tok = probs.max(dim=-1)
        else:
            tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            conf = probs.gather(-1, tok[:, None]).squeeze(-1)
        return tok, conf, ranking(probs, conf, policy, order)

    return pick


def ar_picker(pick, banned: list[int], temperature: float):
    """next(logits [V]) -> the next token of autoregressive decoding: greedy at temperature 0
    (the argmax of the logits, banned ids aside: the token `pick` would choose, without its
    float64 softmax over the vocabulary), else `pick`'s sample."""
    if temperature > 0:
        return lambda logits: int(pick(logits[None])[0][0])

    def greedy(logits):
        if banned:
            logits = logits.clone()
            logits[banned] = float("-inf")
        return int(logits.argmax())

    return greedy


class _Passes:
    """The forward passes of one decode: against the cache, or recomputing the prefix."""

    def __init__(self, model, ids: list[int], G: int, capacity: int, use_cache: bool, device,
                 graphs: bool = False):
        self.model, self.use_cache, self.device = model, use_cache, device
        self.graphed = GraphedStep(model) if graphs else None  # graphs: steps on the cache
        self.ids: list[int] = []
        self.blocks: list[int] = []
        self.passes = 0
        self.cache = model.empty_cache(1, capacity, device, block_size=G) if use_cache else None
        self.last_logits = None  # of the last fold: in AR mode they predict the next token
        if use_cache:  # the prompt in blocks of G, folded in one pass
            self.passes += 1
            self.last_logits = model.fold_blocks(self._t(ids), self.cache).float().cpu()
            self.ids += ids
            self.blocks += blocks_of(len(ids), G)
        else:
            for start in range(0, len(ids), G):
                self.commit(ids[start : start + G])

    def _t(self, ids):
        return torch.tensor([ids], dtype=torch.long, device=self.device)

    def step(self, block: list[int]):
        """Logits [G, V] of the frontier block; the prefix is unchanged."""
        self.passes += 1
        if self.graphed is not None:
            return self.graphed(self._t(block), self.cache)[0].float().cpu()
        if self.use_cache:
            return self.model(self._t(block), self.cache)[0].float().cpu()
        logits = self.model.forward_blockwise(self._t(self.ids + block), self.blocks + [len(block)])
        return logits[0, -len(block) :].float().cpu()

    def commit(self, block: list[int]) -> None:
        """Fold the finished block (the uncached path recomputes the prefix at the next step)."""
        if self.use_cache:
            self.passes += 1
            self.last_logits = self.model.fold(self._t(block), self.cache)[0].float().cpu()
        self.ids += block
        self.blocks.append(len(block))

    def ar_logits(self):
        """Logits [V] predicting the next token after everything committed."""
        if self.use_cache:
            return self.last_logits[-1]
        self.passes += 1
        return self.model.forward_blockwise(self._t(self.ids), self.blocks)[0, -1].float().cpu()


def _check_inputs(model, tokenizer, prompt_ids: list[int]) -> None:
    vocab = model.recipe.vocab_size
    if tokenizer.vocab_size > vocab:
        raise UsageError(
            f"tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size is {vocab}"
        )
    if not prompt_ids:
        raise UsageError("the prompt is empty after tokenisation")


def denoise(step, block, masked, steps: int, pick, threshold: float | None = None,
            used: list[int] | None = None):
    """Fill the masked positions of `block` [B, g] (holding the mask id there) in at most
    `steps` steps; every row has the same number of masked positions. Each step is one
    forward `step(block) -> logits [B, g, V]` against the cache, then `pick` (see `picker`;
    a pick of (tokens, confidences) ranks by confidence) reveals the best-ranked masked
    positions: on the even schedule, or with `threshold` every one at least that confident
    and at least enough to finish in the steps left. The steps taken are appended to `used`."""
    masked = masked.clone()
    B, g = block.shape
    n = int(masked[0].sum())
    k = min(steps, n)
    schedule = even_schedule(n, k)
    taken = 0
    for i in range(k):
        taken += 1
        logits = step(block)
        tok, conf, *rank = pick(logits.reshape(B * g, -1))
        rank = rank[0] if rank else conf
        tok, conf = tok.view(B, g).to(block.device), conf.view(B, g).to(block.device)
        rank = rank.view(B, g).to(block.device).masked_fill(~masked, float("-inf"))
        if threshold is None:
            need = torch.full((B,), schedule[i], device=block.device)
        else:  # at least enough to finish within the steps left
            left = masked.sum(-1)
            need = (left + (k - i) - 1) // (k - i)
        order = rank.argsort(dim=-1, descending=True, stable=True).argsort(dim=-1)
        chosen = order < need[:, None]
        if threshold is not None:
            chosen |= conf >= threshold
        chosen &= masked
        block = torch.where(chosen, tok, block)
        masked &= ~chosen
        if not masked.any():
            break
    if used is not None:
        used.append(taken)
    return block


def banned_ids(tokenizer, vocab: int) -> list[int]:
    """Ids decoding never produces: the tokenizer's specials and ids past its vocabulary."""
    return [i for i in tokenizer.special_ids if i is not None] + list(range(tokenizer.vocab_size, vocab))


def _denoise_block(run: _Passes, pick, mask_id: int, g: int, cfg: DecodeConfig,
                   used: list[int]) -> list[int]:
    """One block of g masked positions filled in at most K steps (see `denoise`)."""
    block = torch.full((1, g), mask_id, dtype=torch.long)
    masked = torch.ones(1, g, dtype=torch.bool)
    out = denoise(lambda b: run.step(b[0].tolist())[None], block, masked, cfg.steps, pick,
                  cfg.threshold, used)
    return out[0].tolist()


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
def generate(model, tokenizer, prompt_ids: list[int], cfg: DecodeConfig, device=None) -> DecodeResult:
    """Generate up to `cfg.length` tokens after `prompt_ids`; stops early at EOS.

    The stats time the prefill (`prefill_s`: the prompt folded into the cache,
    `prompt_tokens_per_s`) apart from the generation (`generate_s`, `tokens_per_s`: generated
    tokens alone); `seconds` is both. A warm-up (`warm_up`, on CUDA, once per model and G in a
    process) is timed apart as `warmup_s`, None when none was made."""
    cfg.check()
    _check_inputs(model, tokenizer, prompt_ids)
    if cfg.mode == "ar" and model.recipe.logit_shift:  # its position i predicts token i + 1
        with reading(model, model.recipe.as_autoregressive()):
            return generate(model, tokenizer, prompt_ids, cfg, device)
    if cfg.mode == "diffusion" and getattr(tokenizer, "mask_id", None) is None:
        raise UsageError(f"diffusion decoding needs a mask token, which the tokenizer "
                         f"({tokenizer.name}) lacks; decode with --mode ar")
    device = device or model.embed.weight.device
    vocab = model.recipe.vocab_size
    G = 1 if cfg.mode == "ar" else cfg.G
    gen = torch.Generator().manual_seed(cfg.seed)
    order = torch.Generator().manual_seed(derive(cfg.seed, ORDER_STREAM))
    banned = banned_ids(tokenizer, vocab)
    key = (model.recipe.recipe_hash, G, str(device))
    warmup_s = None
    if torch.device(device).type in WARMS_UP and key not in _warm:
        warmup_s = warm_up(model, G, device)
        _warm.add(key)
    t0 = time.perf_counter()
    # a graph pays for its capture from the second step of a block on
    graphs = (cfg.graphs and cfg.use_cache and cfg.mode == "diffusion" and cfg.steps > 1
              and graphs_usable(device) and capturable(model))
    run = _Passes(model, prompt_ids, G, len(prompt_ids) + cfg.length + G, cfg.use_cache, device,
                  graphs)
    prompt_passes = run.passes
    t1 = time.perf_counter()  # the prompt is folded (its logits read back: the device is done)
    out: list[int] = []
    n_blocks = 0
    eos = getattr(tokenizer, "eos_id", None)
    pick = picker(banned, cfg.temperature, cfg.top_p, cfg.policy, gen, order)
    next_token = ar_picker(pick, banned, cfg.temperature)
    used: list[int] = []  # denoising steps each block took

    while True:
        if cfg.mode == "ar":
            block = [next_token(run.ar_logits())]
        else:
            block = _denoise_block(run, pick, tokenizer.mask_id, min(G, cfg.length - len(out)),
                                   cfg, used)
        n_blocks += 1
        out += block
        if eos is not None and eos in block:
            out = out[: out.index(eos) + 1]
            break
        if len(out) >= cfg.length:
            break
        run.commit(block)  # (the last block is not folded: nothing reads it)
    t2 = time.perf_counter()
    prefill_s, generate_s = t1 - t0, t2 - t1
    stats = {
        "mode": cfg.mode,
        "G": G,
        "K": 0 if cfg.mode == "ar" else cfg.steps,  # ar: no denoising steps, one fold per token
        "policy": cfg.policy,
        "threshold": cfg.threshold,
        "steps_used": sum(used),
        "steps_per_block": sum(used) / len(used) if used else 0.0,
        "cached": cfg.use_cache,
        "graphs": run.graphed is not None,
        "prompt_tokens": len(prompt_ids),
        "tokens": len(out),
        "blocks": n_blocks,
        "forward_passes": run.passes,
        "prompt_passes": prompt_passes,
        "device": str(device),
        "warmup_s": warmup_s,  # None: no warm-up (the CPU, or this process already warmed up)
        "prefill_s": prefill_s,
        "generate_s": generate_s,
        "seconds": prefill_s + generate_s,
        # uncached, the prompt is not folded ahead: each step recomputes it
        "prompt_tokens_per_s": (len(prompt_ids) / prefill_s if cfg.use_cache and prefill_s > 0
                                else None),
        "tokens_per_s": len(out) / generate_s if generate_s > 0 else float("inf"),
    }
    return DecodeResult(out, stats)
