"""The exactness check: cached decoding equals the uncached block-causal forward.

For the whole model (logits) and for one mixer of each kind (outputs on random inputs), over
several blocks, B > 1, G > 1, in fp32. A recipe above MAX_FP32_WEIGHT_BYTES of fp32 weights is
checked with the same layer plan at a reduced width, with seeded weights.

In bf16 or fp16 the cached path runs as the recipe would decode: weights and activations in that
dtype, states in the recipe's state_dtype, over a long run of blocks (1024 tokens by default, G
the recipe's own, 1 included). Every block is compared with the fp32 uncached forward over the
same rounded weights; the last block's relative error is the drift, which must stay within a
few roundings of the dtype however long the run.

What a check is and reports (dtypes, tolerances, bounds, `plan`, the records) is
fsc.verify_report, which the CLI reads before torch is imported.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from contextlib import contextmanager

import torch

from fsc.accuracy import worst_error
from fsc.checkpoint.io import load_checkpoint
from fsc.costmodel import param_counts
from fsc.costmodel.roofline import MASK_BYTES_PER_PAIR
from fsc.costmodel.shapes import masked_layers
from fsc.dtypes import DTYPE_BYTES
from fsc.errors import WeightsDoNotFit
from fsc.imports.convert import load_published
from fsc.loading import check_fits
from fsc.model.layers import TORCH_DTYPES, MoE
from fsc.model.lm import build_model
from fsc.recipe import Recipe
from fsc.verify_report import (
    DRIFT_TOL,
    LOGIT_DRIFT_FACTOR,
    LOGIT_TOL,
    MAX_FP32_WEIGHT_BYTES,
    MIXER_TOL,
    REDUCED_WIDTH,
    Check,
    VerifyReport,
    plan,
)


def _reduce(recipe: Recipe) -> tuple[Recipe, bool]:
    if param_counts(recipe)["total"] * 4 <= MAX_FP32_WEIGHT_BYTES:
        return recipe, False
    return recipe.with_width(REDUCED_WIDTH, vocab_size=min(recipe.vocab_size, 1024)), True


def mask_bytes(checked: Recipe, G: int, T: int) -> int:
    """Bytes of the block-causal mask of the uncached pass over T tokens, whatever B (a [T, T]
    boolean mask and the fp32 copy scaled_dot_product_attention makes of it, beyond what the
    cost model's activations count): none without attention, or at G 1 without a window (the
    causal kernel needs no mask)."""
    return MASK_BYTES_PER_PAIR * T * T if masked_layers(checked, G) else 0


def check_memory(checked: Recipe, dtype: str, G: int, B: int, n_blocks: int, device,
                 checkpoint: bool = False) -> None:
    """WeightsDoNotFit before anything is allocated. The largest pass is the uncached forward
    over all T = G·blocks tokens (fp32, its logits kept, an attention layer's [T, T] mask:
    `mask_bytes`), beside a cache for T tokens. On top: in bf16/fp16 the model's own copy of the weights, and
    a checkpoint's fp32 weights while they are copied in."""
    T = G * n_blocks
    copies = (0 if dtype == "fp32" else DTYPE_BYTES[dtype]) + (4 if checkpoint else 0)
    try:
        check_fits(checked.with_dtype("fp32"), device, S=0, B=B, G=T, extra={
            "weight copies": copies * param_counts(checked)["total"],
            "attention mask": mask_bytes(checked, G, T)})
    except WeightsDoNotFit as e:
        raise WeightsDoNotFit(f"verify over {T} tokens ({n_blocks} blocks of G {G}, one "
                              f"uncached pass over all of them): {e}; give a smaller --length, "
                              "--blocks or --B") from None


def verify(recipe: Recipe, G: int | None = None, B: int = 2, n_blocks: int | None = None,
           seed: int = 0, device="cpu", checkpoint=None, dtype: str = "fp32",
           published: str | None = None,
           progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """The report. With `checkpoint` (a directory) its verified weights are used, with
    `published` (a published model's folder) its own weights, unless the recipe has to be
    checked at a reduced width. `progress(done, total)` after each block checked, the model's
    and each mixer kind's (a bf16 check of a 3B recipe runs for minutes on a CPU)."""
    G, n_blocks = plan(recipe, dtype, G, n_blocks)
    checked, reduced = _reduce(recipe)
    trained = checkpoint is not None or published is not None
    check_memory(checked, dtype, G, B, n_blocks, device, trained and not reduced)

    fp32 = TORCH_DTYPES["fp32"]
    low = dtype != "fp32"
    state_dtype = TORCH_DTYPES[checked.state_dtype] if low else fp32
    with torch.no_grad():
        model = build_model(checked, device=device, seed=seed, dtype=TORCH_DTYPES[dtype],
                            state_dtype=state_dtype).eval()
        weights = "seeded"
        if trained and not reduced:
            if checkpoint is not None:
                _, loaded = load_checkpoint(checkpoint, device=device, dtype=fp32)
                weights = f"checkpoint {checkpoint}"
            else:
                loaded = load_published(published, device=device)[1]
                weights = f"published weights of {published}"
            model.load_state_dict(loaded.state_dict())  # rounded to `dtype` on the way in
            del loaded
        ref = model
        if low:  # the same rounded weights in fp32, states too
            ref = build_model(checked, device=device, dtype=fp32, state_dtype=fp32).eval()
            ref.load_state_dict(model.state_dict())
        gen = torch.Generator().manual_seed(seed)
        run = _drift if low else _exact
        total, done = n_blocks * (1 + len(_mixers(checked))), itertools.count(1)
        checks = run(model, ref, checked, G, B, n_blocks, gen, device, dtype,
                     lambda: progress and progress(next(done), total))

    return VerifyReport(recipe.name, checked.name, reduced, weights, checked.d_model, G, B,
                        n_blocks, G * n_blocks, dtype, checked.state_dtype if low else "fp32",
                        checks)


def _mixers(checked):
    """(kind, index of its first layer) for each mixer kind of the plan."""
    return [(kind, checked.layer_plan.index(kind)) for kind in dict.fromkeys(checked.layer_plan)]


def _exact(model, ref, checked, G, B, n_blocks, gen, device, dtype, tick):
    """fp32: cached forward, fold (and a second forward: the first must not touch the cache)
    against the uncached forward, block by block."""
    T = G * n_blocks
    checks = []
    tokens = torch.randint(0, checked.vocab_size, (B, T), generator=gen).to(device)
    want = model.forward_blockwise(tokens, [G] * n_blocks)
    cache = model.empty_cache(B, T, device, block_size=G)
    errs = []  # (block, what, error)
    for b in range(n_blocks):
        blk = tokens[:, b * G : (b + 1) * G]
        step = model(blk, cache)
        fold = model.fold(blk, cache)
        errs += [(b, "step", (step - want[:, b * G : (b + 1) * G]).abs().max().item()),
                 (b, "fold", (fold - step).abs().max().item())]
        tick()
    scale = want.abs().max().item()
    checks.append(_check("model logits", "model", errs, scale, LOGIT_TOL * max(1.0, scale)))

    for kind, i in _mixers(checked):
        mixer = model.layers[i].mixer
        x = torch.randn(B, T, checked.d_model, generator=gen).to(device)
        want = mixer.forward_blockwise(x, [G] * n_blocks)
        cache = mixer.empty_cache(B, T, device)
        errs = []
        for b in range(n_blocks):
            sl = slice(b * G, (b + 1) * G)
            step = mixer(x[:, sl], cache)
            again = mixer(x[:, sl], cache)  # forward must not have touched the cache
            fold = mixer.fold(x[:, sl], cache)
            errs += [(b, what, (o - want[:, sl]).abs().max().item())
                     for what, o in (("step", step), ("again", again), ("fold", fold))]
            tick()
        scale = max(want.abs().max().item(), 1e-30)
        checks.append(_check(f"{kind} mixer", kind, errs, scale, MIXER_TOL * scale))
    return checks


# Where an exactness check first goes wrong, in words: which call of which block (1-based).
_WRONG = {
    "step": lambda b: (f"the step of block {b}, which reads what the fold"
                       + (" of block 1 wrote" if b == 2 else f"s of blocks 1 to {b - 1} wrote")
                       if b > 1 else "the step of block 1, on an empty cache"),
    "again": lambda b: f"a second step of block {b}: the first step changed the cache",
    "fold": lambda b: f"the fold of block {b}: its output is not the step's",
}


def _check(what: str, kind: str, errs: list[tuple[int, str, float]], scale: float,
           tol: float) -> Check:
    """An exactness Check of `errs` ((block, call, error), in the order they ran), naming the
    first call past `tol` (a NaN included) when there is one."""
    worst = worst_error(e for _, _, e in errs)
    first = next(((b, call) for b, call, e in errs if not e <= tol), None)
    wrong = None if first is None else _WRONG[first[1]](first[0] + 1)
    if not math.isfinite(scale):  # no cache is to blame: the reference is no number itself
        wrong = ("the uncached forward itself, whose output holds NaN or inf, cache or none "
                 "(the weights, or what they make of the input)")
    return Check(what, kind, worst, scale, tol, worst <= tol, first_wrong=wrong)


def _drift(model, ref, checked, G, B, n_blocks, gen, device, dtype, tick):
    """bf16/fp16: the cached path in `dtype`, a step then a fold of each block in turn (as a
    decode runs them), against the fp32 uncached forward of `ref` over the same rounded
    weights."""
    T, lengths = G * n_blocks, [G] * n_blocks
    blocks = [slice(b * G, (b + 1) * G) for b in range(n_blocks)]
    # The coarser of the activations and the states sets the tolerance (fp16 with bf16 states:
    # bf16's).
    tol = DRIFT_TOL["bf16" if "bf16" in (dtype, checked.state_dtype) else dtype]
    tokens = torch.randint(0, checked.vocab_size, (B, T), generator=gen).to(device)
    cache = model.empty_cache(B, T, device, block_size=G)
    with _routing(model, B) as picks:
        # a step routes as the fold after it: its picks are dropped, the fold's kept
        got = _step_fold(model, tokens, cache, blocks, tick,
                         lambda: [c.pop() for c in picks.values()])
    with _routing(ref, B, follow=picks):
        want = ref.forward_blockwise(tokens, lengths)
    checks = [_errors("model logits", "model", LOGIT_DRIFT_FACTOR * tol, blocks, want, *got)]
    for kind, i in _mixers(checked):
        mixer = model.layers[i].mixer
        x = torch.randn(B, T, checked.d_model, generator=gen).to(device).to(model.dtype)
        got = _step_fold(mixer, x, mixer.empty_cache(B, T, device), blocks, tick)
        want = ref.layers[i].mixer.forward_blockwise(x.float(), lengths)
        checks.append(_errors(f"{kind} mixer", kind, tol, blocks, want, *got))
    return checks


def _step_fold(module, inputs, cache, blocks, tick, after_step=lambda: None):
    """(steps, folds), each [B, T, ...]: a step of each block, then its fold, in turn; `tick()`
    after each block."""
    steps, folds = [], []
    for sl in blocks:
        steps.append(module(inputs[:, sl], cache))
        after_step()
        folds.append(module.fold(inputs[:, sl], cache))
        tick()
    return torch.cat(steps, 1), torch.cat(folds, 1)


@contextmanager
def _routing(model, B: int, follow: dict | None = None):
    """Record the experts each MoE router picks for every token, or (`follow`) make it pick
    the recorded ones, with its own gate values. A near-tie that 16 bits break the other way
    switches an expert: a jump in the output, not drift, so the reference takes the cached
    run's choices."""
    picks, hooks = {}, []

    def hook(i, k):
        def run(module, args, out):
            if follow is None:
                picks.setdefault(i, []).append(out.float().topk(k, dim=-1).indices.view(B, -1, k))
                return None
            chosen = torch.cat(follow[i], 1).reshape(out.shape[0], k)
            keep = torch.zeros_like(out, dtype=torch.bool).scatter(-1, chosen, True)
            return out.masked_fill(~keep, float("-inf"))
        return run

    for i, layer in enumerate(model.layers):
        if isinstance(layer.ffn, MoE):
            hooks.append(layer.ffn.router.register_forward_hook(hook(i, layer.ffn.top_k)))
    try:
        yield picks
    finally:
        for h in hooks:
            h.remove()


def _errors(what, kind, tol, blocks, want, *got) -> Check:
    """The first, worst and last block's error (the worst of the `got` outputs: steps, folds),
    each relative to the largest value of that block's reference (outputs may shrink or grow
    along the sequence)."""
    diffs, errs = [], []
    for sl in blocks:
        diffs.append(worst_error((g[:, sl].float() - want[:, sl]).abs().max().item()
                                 for g in got))
        errs.append(diffs[-1] / max(want[:, sl].abs().max().item(), 1e-30))
    worst = worst_error(errs)
    first = next((b for b, e in enumerate(errs, 1) if not e <= tol), None)
    return Check(what, kind, worst_error(diffs), want.abs().max().item(), tol, worst <= tol,
                 first_rel_err=errs[0], last_rel_err=errs[-1], max_rel_err=worst,
                 first_wrong=None if first is None else f"block {first} of {len(errs)}")

