"""Log-likelihoods of continuations, the numbers a harness asks a language model for.

- Autoregressive models (G = 1): the exact summed log-probability of the continuation's
  tokens given everything before them, and whether greedy decoding would have produced them
  (each token the argmax of its position's logits), from one forward of the whole sequence.
  Requests are batched, right-padded: every mixer is causal at G = 1, so padding after a
  sequence never reaches it.
- Block-diffusion models (G > 1): a lower bound on the log-likelihood (minus the masked-
  diffusion bound on the NLL). Blocks are laid from position 0, as in training; the blocks
  before the continuation's first are folded into the cache once, and each block holding
  continuation tokens is read against that cache `mc` times, each draw masking l ~ U{1..n}
  of its n continuation positions at random (context tokens in the block stay clean) and
  scoring (n / l) · Σ_masked CE: an unbiased Monte Carlo estimate of the block's bound (see
  fsc.eval.loss). Then the block's true tokens are folded and the next block is read. The
  draws of one block run as one batch against the folded prefix; `cached=False` recomputes
  the prefix for every draw instead (the same draws, the same number up to float rounding).
  "Greedy" for a diffusion model: with all of a block's continuation positions masked, each
  position's argmax is its token.

The draws are seeded by the request's tokens and `seed`, so a request's bound does not depend
on the order or the company it is scored in.
"""

from __future__ import annotations

import math
import zlib

import torch

from fsc.model.cache import copy_cache


@torch.no_grad()
def ar_batch(model, requests: list[tuple[list[int], list[int]]], device) -> list[tuple[float, bool]]:
    """Each request is (inp, continuation): `inp` the tokens read (context and continuation
    but the last token), `continuation` the tokens scored, predicted by the last
    len(continuation) positions of `inp`. Returns (summed log-probability, greedy) each."""
    T = max(len(inp) for inp, _ in requests)
    x = torch.zeros(len(requests), T, dtype=torch.long)
    for i, (inp, _) in enumerate(requests):
        x[i, : len(inp)] = torch.tensor(inp)
    logits = model.forward_blockwise(x.to(device), [1] * T)
    out = []
    for i, (inp, cont) in enumerate(requests):
        n = len(inp)
        logp = torch.log_softmax(logits[i, n - len(cont) : n].double(), dim=-1)
        target = torch.tensor(cont, device=logp.device)
        out.append((float(logp.gather(-1, target[:, None]).sum()),
                    bool((logp.argmax(-1) == target).all())))
    return out


def draw_seed(seed: int, ids: list[int], start: int) -> int:
    """The seed of a request's draws: its tokens, where its continuation starts, `seed`."""
    data = torch.tensor(ids, dtype=torch.int64).numpy().tobytes()
    return (zlib.crc32(data) * 1_000_003 + start * 7919 + seed) % (2**62)


@torch.no_grad()
def diffusion_loglikelihood(model, mask_id: int, ids: list[int], start: int, mc: int, device,
                            seed: int = 0, cached: bool = True, prefix=None) -> tuple[float, bool]:
    """(−bound, greedy) of ids[start:] after ids[:start] (see the module docstring); `prefix`:
    a cache that has folded ids[:start // G · G] (it is copied, not changed). An empty
    continuation is (0.0, True), as at G = 1."""
    G = model.recipe.block_size
    T = len(ids)
    if start >= T:
        return 0.0, True
    first = start // G
    gen = torch.Generator().manual_seed(draw_seed(seed, ids, start))
    if cached:
        cache = copy_cache(prefix) if prefix is not None else fold_prefix(
            model, ids[: first * G], len(ids) + G, device)
    total, greedy = 0.0, True
    for b in range(first, math.ceil(T / G)):
        lo, hi = b * G, min((b + 1) * G, T)
        block = torch.tensor(ids[lo:hi], dtype=torch.long)
        g = hi - lo
        sup = torch.arange(max(lo, start) - lo, g)  # the continuation's positions in the block
        n = len(sup)
        # mc draws, then one row with every continuation position masked (greedy)
        counts = torch.cat([torch.randint(1, n + 1, (mc,), generator=gen), torch.tensor([n])])
        u = torch.rand(mc + 1, n, generator=gen)
        order = u.argsort(-1).argsort(-1)  # a random rank of each continuation position
        masked = torch.zeros(mc + 1, g, dtype=torch.bool)
        masked[:, sup] = order < counts[:, None]
        noisy = torch.where(masked, torch.full_like(block, mask_id), block.expand(mc + 1, g))
        if cached:
            logits = model(noisy.to(device), copy_cache(cache, mc + 1))
        else:
            before = torch.tensor(ids[:lo], dtype=torch.long).expand(mc + 1, lo)
            x = torch.cat([before, noisy], dim=1).to(device)
            logits = model.forward_blockwise(x, [G] * b + [g])[:, lo:]
        logp = torch.log_softmax(logits.double().cpu(), dim=-1)
        ce = -logp.gather(-1, block.expand(mc + 1, g)[..., None])[..., 0]  # [mc + 1, g]
        per_draw = (ce * masked).sum(-1) * n / counts  # (n / l) · Σ_masked CE
        total += float(per_draw[:mc].mean())
        greedy &= bool((logp[mc, sup].argmax(-1) == block[sup]).all())
        if cached:
            model.fold(block[None].to(device), cache)
    return -total, greedy


def fold_prefix(model, ids: list[int], capacity: int, device):
    """A cache of one sequence, room for `capacity` tokens, with `ids` (whole blocks) folded
    in one pass."""
    cache = model.empty_cache(1, capacity, device)
    if ids:
        model.fold_blocks(torch.tensor([ids], dtype=torch.long, device=device), cache)
    return cache
