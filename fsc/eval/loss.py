"""Held-out loss (`--task loss`): the per-token NLL, or its bound, on sequences of a text, in a
form comparable across backbones and between diffusion and autoregressive checkpoints.

- Autoregressive checkpoints (and `--mode ar`): the exact next-token NLL of every position
  but the first of each sequence, in nats per token; of every position, read after BOS, for
  a model whose sequences begin with BOS (an imported Llama's: `fsc.source.Source.starts_with_bos`).
- Block-diffusion checkpoints: the masked-diffusion bound (the ELBO) of every block of the
  sequence given the clean blocks before it, read in one two-stream forward. The bound of a
  block of G positions is ∫₀¹ (1/t) E[Σ_masked CE] dt with each position masked with
  probability t; integrating t out leaves Σ_{l=1..G} (the mean CE of a position when l
  positions are masked), so one draw per block of l ~ U{1..G} and l positions masked at
  random, scored by (1/l) Σ_masked CE, is an unbiased estimate of the block's bound per
  token (the form LLaDA evaluates with; never an empty mask, so no 1/t spikes and no forced
  mask to bias it, unlike the training draw). The mean over blocks and sequences is an upper
  bound on the true NLL per token, in expectation.

Each sequence gives one number (its mean over tokens); the cell reports their mean and its
standard error over sequences, and bits per byte: the summed NLL in bits over the UTF-8 bytes
the scored tokens stand for (for fsc's byte tokenizer, tokens are bytes; `scored_bytes`).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Iterator
from dataclasses import replace

import torch

from fsc.costmodel import memory
from fsc.costmodel.roofline import MASK_BYTES_PER_PAIR
from fsc.costmodel.shapes import masked_layers
from fsc.data.ruler import MULTI_NEEDLES, RulerOptions
from fsc.data.sources import KNOBS, DataOptions, data_name, open_data, tasks_of
from fsc.data.tasks import Sample
from fsc.errors import UsageError, WeightsDoNotFit
from fsc.eval.grid import EvalGrid
from fsc.eval.retrieval import ratio
from fsc.loading import free_bytes
from fsc.objective import Batch, Blocks, block_losses, draw_blocks, sequence_nll
from fsc.recipe import Recipe
from fsc.seeds import derive
from fsc.text import human_bytes
from fsc.tokenizer import token_sizes


def _task_names(data: str) -> set[str]:
    """The synthetic tasks --data `data` draws from (none for text)."""
    return {name for name, _ in tasks_of(data) or []}


def reads_pairs(grid: EvalGrid) -> bool:
    """Whether the loss of `grid` reads --pairs: its data draws mqar sequences."""
    return "mqar" in _task_names(grid.data)


def knobs(grid: EvalGrid) -> dict:
    """The cell's record of the suite's knobs its sequences were drawn with: each a task of
    the data reads (vt's hops, ...) at its value, None where none reads it (text, passkey)."""
    tasks = _task_names(grid.data)
    drawn = {k: getattr(grid.ruler, k) if tasks & set(readers) else None
             for k, readers in KNOBS.items()}
    if drawn["needles"] is None and tasks & set(KNOBS["needles"]):  # niah's multi variants
        drawn["needles"] = MULTI_NEEDLES
    return drawn


def data_options(grid: EvalGrid) -> DataOptions:
    """How the sequences of --data are drawn: the grid's options with the suite's knobs that a
    task of the data reads, as training recorded them (trained on vt with --hops 2, the loss
    is read on vt with two hops)."""
    default = RulerOptions()
    tasks = _task_names(grid.data)
    suite = {k: getattr(grid.ruler, k) for k, readers in KNOBS.items()
             if tasks & set(readers) and getattr(grid.ruler, k) != getattr(default, k)}
    return replace(grid.options, suite=suite)


def check(grid: EvalGrid, tokenizer) -> None:
    """UsageError for a missing or unreadable --data, a length it cannot fill, or several
    --pairs (the data is drawn with one)."""
    if grid.data is None:
        raise UsageError("--task loss needs --data (shakespeare, a text file or a task)")
    if len(grid.pairs) > 1:
        said = ",".join(map(str, grid.pairs))
        if reads_pairs(grid):
            raise UsageError(f"--pairs {said}: --task loss draws its mqar sequences with one "
                             "count; give one (a run each)")
        raise UsageError(f"--pairs {said}: for --task loss on mqar data only (this is "
                         f"{grid.data})")
    for n in grid.lengths:
        if n < 2 and grid.ar and not grid.bos:
            raise UsageError(f"--lengths {n}: an autoregressive model's loss predicts each token "
                             "from those before it, the first given, so a sequence needs at "
                             "least 2 tokens")
        if n % grid.G:
            raise UsageError(f"--lengths: {n} is not a multiple of the block size G = {grid.G}")
        open_data(grid.data, tokenizer, n, grid.G, grid.settings.seed, data_options(grid),
                  option="--lengths", split="val")


def pass_bytes(recipe: Recipe, ar: bool, L: int, B: int) -> tuple[int, int]:
    """(bytes, of which attention masks) at least of one pass of the loss over B sequences of
    L tokens, with no cache: the weights, the pass's live set and logits (over both streams
    of the bound, 2L tokens a sequence; L read autoregressively) and, where attention reads a
    mask, the largest one with the fp32 copy attention makes of it: the noised stream's
    [B, L, 2L] (the bound), or [L, L] (a window read autoregressively; the causal kernel
    needs none). What torch allocates besides is not counted."""
    mem = memory(recipe, 0, B, L if ar else 2 * L)
    pairs = L * L if masked_layers(recipe, 1) else 0
    if not ar:
        pairs = 2 * B * L * L if masked_layers(recipe, recipe.block_size, "two-stream") else 0
    masks = MASK_BYTES_PER_PAIR * pairs
    return mem.weight_bytes + mem.activation_bytes + masks, masks


def fits(grid: EvalGrid, recipe: Recipe, device) -> None:
    """WeightsDoNotFit, before any model is loaded, when a pass of `batch` sequences at the
    longest length needs more than the device has free (pass_bytes: a block-diffusion bound
    with attention holds a mask quadratic in the length)."""
    L, B = max(grid.lengths), min(grid.settings.batch, grid.settings.samples)
    need, masks = pass_bytes(recipe, grid.ar, L, B)
    have = free_bytes(device)
    if need <= have:
        return
    raise WeightsDoNotFit(
        f"--lengths {L}: --task loss reads {B} sequence{'s' * (B > 1)} in one pass, which "
        f"needs at least {human_bytes(need)}" + (f" (attention masks {human_bytes(masks)})"
                                                 if masks else "")
        + f" but {device} has {human_bytes(have)} free; "
        + ("lower --batch or --lengths" if B > 1 else "lower --lengths"))


def draw_bound(batch: Batch, G: int, mask_id: int, gens: list[torch.Generator]) -> Blocks:
    """Every block with supervised positions, l ~ U{1..n} of its n supervised positions
    masked at random (see the module docstring). Row b draws from `gens[b]`, a draw for each
    block of its sequence by the block's index, so that a sequence's draw is the same whatever
    batch it is scored in."""
    # the layout (which blocks, their clean tokens); its own draw is replaced below
    d = draw_blocks(batch, G, mask_id, torch.Generator().manual_seed(0))
    B, K = d.blocks.shape
    sup = d.supervised  # (B, K)
    n = batch.tokens.shape[1] // G  # blocks a sequence has
    draws = [(torch.rand(n, G, generator=g), torch.rand(n, generator=g)) for g in gens]
    index = d.blocks.cpu()  # (B, K): the block each slot holds
    u = torch.stack([w for w, _ in draws]).gather(1, index[..., None].expand(-1, -1, G))
    size = torch.stack([c for _, c in draws]).gather(1, index)
    at = (index[..., None] * G + torch.arange(G))  # (B, K, G) positions
    target = batch.target.cpu().gather(1, at.flatten(1)).view(B, K, G) & d.scored[..., None]
    rank = torch.where(target, u, 2.0).argsort(-1).argsort(-1)  # supervised positions first
    count = (size * sup).long() + 1  # l in 1..n
    masked = (rank < count[..., None]) & target
    masked = masked.flatten(1).to(d.labels.device)
    return Blocks(d.clean, d.labels.masked_fill(masked, mask_id), d.labels, masked, d.blocks,
                  d.scored, d.rate, d.supervised, G, torch.zeros_like(d.scored))


def sequence_bounds(model, batch: Batch, G: int, mask_id: int,
                    gens: list[torch.Generator]) -> torch.Tensor:
    """[B] on the CPU: each sequence's per-token NLL bound, every block drawn once (row b from
    `gens[b]`)."""
    d = draw_bound(batch, G, mask_id, gens)
    per_block = block_losses(model, d, "masked")  # [B, K]: each block's per-token bound
    scored = d.scored.to(per_block.device)
    return (per_block.sum(-1) / scored.sum(-1)).float().cpu()


def after_bos(sample: Sample, tokenizer) -> Sample:
    """`sample` read after BOS: every one of its tokens is predicted, BOS is not."""
    return Sample([tokenizer.bos_id, *sample.ids], [False, *sample.target], [False, *sample.score])


@torch.no_grad()
def measure(model, tokenizer, grid: EvalGrid, lengths, device) -> Iterator[dict]:
    for length in lengths:
        yield heldout_loss(model, tokenizer, grid, length, device)


def scored_bytes(tokenizer, ids: list[int], first_given: bool) -> int:
    """The UTF-8 bytes of the tokens of `ids` a loss scores (all, or all but the first where
    `first_given`). A sample may cut a character, which decoding would turn into U+FFFD, and a
    sentencepiece decoder strips a text's first space, so where a token's own bytes are known
    (`fsc.tokenizer.token_sizes`) they are counted. Else the text they decode to, less the
    first token's where it is given (decoded alone and with the rest, so that a tokenizer which
    strips a text's leading space counts the space with the token that holds it)."""
    size = _sizes(tokenizer)
    if size is not None:
        return sum(map(size, ids[1 if first_given else 0 :]))
    whole = len(tokenizer.decode(ids).encode("utf-8"))
    return max(0, whole - len(tokenizer.decode(ids[:1]).encode("utf-8"))) if first_given else whole


@functools.lru_cache(maxsize=4)
def _sizes(tokenizer):
    """`token_sizes`, read once a tokenizer (a tokenizer.json is parsed to read its decoder)."""
    return token_sizes(tokenizer)


def heldout_loss(model, tokenizer, grid: EvalGrid, length: int, device) -> dict:
    """A loss cell: `samples` sequences of `length` tokens of the validation split."""
    settings = grid.settings
    G = model.recipe.block_size
    options = data_options(grid)
    source = open_data(grid.data, tokenizer, length, G, derive(settings.seed, 7), options,
                       option="--lengths", split="val")
    losses, nbytes, t0, tokens = [], [], time.perf_counter(), 0
    bos = grid.bos and settings.mode == "ar"  # each sequence read after BOS, as the model reads
    first_given = settings.mode == "ar" and not bos  # ar: the first is given, not scored
    for start in range(0, settings.samples, settings.batch):
        idx = range(start, min(start + settings.batch, settings.samples))
        samples = [source.sample(i) for i in idx]
        batch = Batch.of([after_bos(s, tokenizer) for s in samples] if bos else samples, device)
        if settings.mode == "ar":  # exact: no draw
            losses += sequence_nll(model, batch).tolist()
        else:  # sequence i draws from its own seed, whatever --batch
            gens = [torch.Generator().manual_seed(derive(settings.seed, i, 8)) for i in idx]
            losses += sequence_bounds(model, batch, G, tokenizer.mask_id, gens).tolist()
        nbytes += [scored_bytes(tokenizer, s.ids, first_given) for s in samples]
        tokens += batch.tokens.numel()
    seconds = time.perf_counter() - t0
    n = len(losses)
    mean = sum(losses) / n
    se = (sum((x - mean) ** 2 for x in losses) / (n - 1) / n) ** 0.5 if n > 1 else None
    scored = length - 1 if first_given else length
    bits = sum(x * scored for x in losses) / math.log(2)
    text = getattr(source, "supervises", None) == "all" and sum(nbytes) > 0
    return {"task": "loss", "data": data_name(grid.data), "length": length,
            "length_ratio": ratio(length, settings),
            "pairs": options.pairs if reads_pairs(grid) else None,
            **knobs(grid), "n": n, "loss": mean, "loss_se": se,
            "distinct_sequences": getattr(source, "n", None),
            "bits_per_byte": bits / sum(nbytes) if text else None,
            "tokens_per_s": tokens / seconds, "seconds": seconds}
