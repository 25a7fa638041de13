"""Generative perplexity (`--task genppl`): how good the text a decoder writes is, against what
it costs to write it.

Every cell decodes the same `samples` prompts (stretches of `prompt_length` tokens drawn from
the validation text, seeded; or BOS alone at prompt length 0) into continuations of `length`
tokens, one decoding per cell: block diffusion at a G, K, reveal policy and threshold, or
autoregressively (the checkpoint itself when it is autoregressive, or a baseline checkpoint),
at a temperature and top-p, sampled in float64, each sample's seed the same in every cell. A
separate autoregressive scorer (fsc.eval.scorers) reads each continuation after its prompt:

- Gen-PPL: exp(summed NLL / summed scorer tokens) over the cell's samples, with a 95 %
  percentile bootstrap interval over samples;
- the mean unigram entropy per sample (nats, generator tokens) and its standard error, and the
  mean fraction of repeated n-grams: a sampler that repeats itself has a low Gen-PPL too;
- tokens/s of the decoding alone, forward passes per generated token and the denoising steps
  per block actually used (threshold decoding adapts them);
- samples that ended at EOS before `length` (`ended_early`; scored on what they hold);
- samples holding a character the scorer's tokenizer drops (`uncarried`; scored on the rest).

A reference row (mode `reference`) scores the validation text's own continuations of the same
prompts under the same scorer (each up to its first EOS, as a sample), so a reader sees how far
the samples are from real text.

Samples are decoded `--batch` at a time and scored one at a time. Before any model is loaded,
`fits` checks that a batch of samples of the longest length fits the memory free (every model's
weights, the cache for the prompts and the samples, the prompts folded in one pass, the
scorer's forward over one: the cost model's floor), so that a size that cannot fit is one line
at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from fsc.costmodel import memory, prompt_memory
from fsc.data.sources import data_name, open_data
from fsc.decode import DecodeConfig, banned_ids, generate_batch
from fsc.errors import FscError, UsageError, WeightsDoNotFit
from fsc.eval import mauve, textstats
from fsc.eval.grid import Decoding, EvalGrid
from fsc.eval.request import is_text
from fsc.eval.scorers import ScoredText, load_scorer, same_tokenizer, scorer_window
from fsc.loading import free_bytes, load_model
from fsc.model.lm import read_as
from fsc.recipe import Recipe
from fsc.seeds import derive
from fsc.source import Source, load_source_recipe, resolve_checkpoint
from fsc.text import human_bytes
from fsc.tokenizer import begun, first_stop, stop_ids


def text_tokens(grid: EvalGrid, tokenizer, length: int):
    """The validation text's tokens (a shipped corpus's val split, or a text file)."""
    P = grid.gen.prompt_length
    # errors name the total: "... of --prompt-length 64 + --lengths 128 = 192"
    option = f"--prompt-length {P} + --lengths {length} =" if P else "--lengths"
    return open_data(grid.data, tokenizer, P + length, 1, grid.settings.seed, grid.options,
                     option=option, split="val").tokens


def check(grid: EvalGrid, tokenizer) -> None:
    """UsageError, before any model is loaded, for data genppl cannot draw from, or a
    --baseline that cannot read the checkpoint's prompts."""
    if grid.data is None:
        raise UsageError("--task genppl needs --data (shakespeare or a text file) for its "
                         "prompts and reference text")
    if not is_text(grid.data):  # before its lengths: a task's own errors would mislead
        raise UsageError(f"--data {grid.data}: genppl draws its prompts and reference text "
                         "from natural text (shakespeare or a .txt/.jsonl/.parquet file)")
    for n in grid.lengths:
        text_tokens(grid, tokenizer, n)
    if grid.gen.prompt_length == 0 and getattr(tokenizer, "bos_id", None) is None:
        raise UsageError("--prompt-length 0 starts from BOS, which the tokenizer lacks")
    for ref in {d.checkpoint for d in grid.gen.decodings if d.checkpoint is not None}:
        own = Source.read(ref).tokenizer(need_mask=False)
        if not _same_ids(own, tokenizer):
            raise UsageError(f"--baseline {ref}: its tokenizer ({own.name}) is not the "
                             f"checkpoint's ({tokenizer.name}); the baseline decodes the "
                             "checkpoint's prompt tokens, so it must read the same ones")


def _same_ids(a, b) -> bool:
    """Whether ids of tokenizer `a` mean the same text under `b`: the same tokenizer, two
    copies of one vocabulary, or one vocabulary and the same with special tokens added (an
    adapted model's tokenizer is its published one and a mask token, which no text encodes to:
    fsc.train.run.with_mask_token)."""
    if same_tokenizer(a, b):
        return True
    if not all(hasattr(getattr(t, "tok", None), "get_vocab") for t in (a, b)):
        return False
    small, large = sorted((a.tok, b.tok), key=lambda t: t.get_vocab_size(with_added_tokens=True))
    have, more = small.get_vocab(with_added_tokens=True), large.get_vocab(with_added_tokens=True)
    special = {i for i, t in large.get_added_tokens_decoder().items() if t.special}
    return (all(more.get(t) == i for t, i in have.items())
            and all(i in special for t, i in more.items() if t not in have))


def draws(grid: EvalGrid, tokens, length: int) -> list[tuple[list[int], list[int]]]:
    """(prompt, reference continuation) of each sample: seeded offsets into the text."""
    P, n = grid.gen.prompt_length, grid.settings.samples
    span = len(tokens) - P - length
    if span < 0:
        raise UsageError(f"--lengths {length}: the validation text holds {len(tokens)} tokens, "
                         f"fewer than --prompt-length {P} plus {length}")
    out = []
    for i in range(n):
        at = random.Random(derive(grid.settings.seed, length, i, 10)).randint(0, span)
        out.append((tokens[at : at + P].tolist(), tokens[at + P : at + P + length].tolist()))
    return out


@dataclass(frozen=True)
class Models:
    """What a genppl run holds, by recipe: the checkpoint and each baseline (by its path), each
    G a decoding reads it at, and the scorer's (None: a transformers model, not counted) with
    the window it reads text in (`scorer_window`; None: in one pass)."""

    weights: dict[str, Recipe]
    decoders: frozenset[tuple[str, int]]  # (key in weights, G)
    scorer: Recipe | None
    scorer_window: int | None = None


def models_of(grid: EvalGrid, recipe: Recipe) -> Models:
    """The models of `grid` (`recipe` the checkpoint's), read without their weights."""
    weights, decoders = {grid.checkpoint: recipe}, set()
    for d in grid.gen.decodings:
        if d.checkpoint is not None:  # a baseline, decoded autoregressively
            weights.setdefault(d.checkpoint, load_source_recipe(d.checkpoint))
        decoders.add((d.checkpoint or grid.checkpoint, d.G if d.mode == "diffusion" else 1))
    try:  # an fsc checkpoint or recipe, or a model folder fsc imports: its recipe, no weights
        src = Source.read(str(resolve_checkpoint(grid.gen.scorer)))
    except (FscError, OSError):
        return Models(weights, frozenset(decoders), None)
    return Models(weights, frozenset(decoders), src.recipe, scorer_window(src))


def sample_bytes(models: Models, P: int, L: int, B: int = 1) -> tuple[int, int, str]:
    """(bytes, of which weights, what holds the rest) of B samples of L tokens after a P-token
    prompt decoded together, at their peak, by the cost model (a floor): every model's weights
    at once, and the largest of a decoding's cache for both with its prompts folded in one pass
    (`prompt_memory`) or a step of G, and the scorer's forward over the prompt (or BOS) and
    the sample."""
    P = max(P, 1)  # an empty prompt is BOS
    held = [*models.weights.values(), *([models.scorer] if models.scorer else [])]
    weights = sum(memory(r, 0, 1, 1).weight_bytes for r in held)
    passes = {}
    for key, G in sorted(models.decoders):
        r = models.weights[key]
        r = r.model_copy(update={"block_size": G}) if G > 1 else r.as_autoregressive()
        fold, step = prompt_memory(r, P, B, G), memory(r, P + L, B, G)  # B decoded together
        passes[f"{r.name} to fold the {P}-token prompt in one pass and decode at G {G}"] = (
            step.cache_capacity_bytes + max(fold.activation_bytes, step.activation_bytes))
    if models.scorer is not None:
        n = min(P + L, models.scorer_window or P + L)  # a window at a time past its length
        read = memory(models.scorer, 0, 1, n)
        how = "in one pass" if n == P + L else f"in windows of {n}"
        passes[f"the scorer to read {P + L} tokens {how}"] = (
            read.cache_capacity_bytes + read.activation_bytes)
    what = max(passes, key=passes.get)
    return weights + passes[what], weights, what


def fits(grid: EvalGrid, recipe: Recipe, device, budget: int | None = None) -> None:
    """WeightsDoNotFit (one line naming --prompt-length or --lengths and how far it fits), before
    any model is loaded, when a sample of the longest length needs more than `budget` bytes
    (default: the device's free memory; see `sample_bytes`)."""
    budget = free_bytes(device) if budget is None else budget
    models, P, L = models_of(grid, recipe), grid.gen.prompt_length, max(grid.lengths)
    B = min(grid.settings.batch, grid.settings.samples)
    need, weights, what = sample_bytes(models, P, L, B)
    if need <= budget:
        return
    who = "a genppl sample needs" if B == 1 else f"{B} genppl samples decoded together need"
    head = (f"--prompt-length {P} and --lengths {L}: {who} at least "
            f"{human_bytes(need)} ({human_bytes(weights)} of weights, "
            f"{human_bytes(need - weights)} for {what}) but {device} has {human_bytes(budget)} "
            "free")
    if weights > budget:
        raise WeightsDoNotFit(f"{head}: the weights alone do not fit")
    fit_P = _largest(lambda n: sample_bytes(models, n, L, B)[0] <= budget, 0, P)
    if fit_P is not None:
        raise WeightsDoNotFit(f"{head}; at most --prompt-length {fit_P} fits")
    fit_L = _largest(lambda n: sample_bytes(models, P, n, B)[0] <= budget, 1, L)
    raise WeightsDoNotFit(f"{head}; " + (f"at most --lengths {fit_L} fits" if fit_L is not None
                                         else "lower --prompt-length and --lengths"))


def _largest(ok: Callable[[int], bool], low: int, high: int) -> int | None:
    """The largest n in low..high - 1 with ok(n) (ok true up to some n, false after), or None."""
    if high <= low or not ok(low):
        return None
    while low < high - 1:  # ok(low) holds, ok(high) does not
        mid = (low + high) // 2
        low, high = (mid, high) if ok(mid) else (low, mid)
    return low


@torch.no_grad()
def measure(model, tokenizer, grid: EvalGrid, lengths, device,
            tick: Callable[[int], None]) -> Iterator[dict]:
    """Each length's reference row, then a row per decoding; tick(1) after each sample is
    decoded (where the cell decodes) and scored."""
    gen = grid.gen
    scorer = ScoredText(load_scorer(gen.scorer, device, grid.settings.seed), tokenizer)
    stops = stop_ids(tokenizer)
    for length in lengths:
        # each reference continuation, as each sample, is the text before its first EOS (in a
        # file of documents, the next document is not its continuation)
        samples = [(prompt, _before_stop(ref, stops))
                   for prompt, ref in draws(grid, text_tokens(grid, tokenizer, length), length)]
        _roundtrip(scorer, samples)
        yield _reference(grid, scorer, samples, length, tick)
        for d in gen.decodings:
            yield _decoded(grid, model, tokenizer, scorer, samples, length, d, device, tick)


def _roundtrip(scorer: ScoredText, samples) -> None:
    """UsageError when the scorer's tokenizer cannot carry the text (it would score another):
    any prompt or reference continuation, or the text of any token the checkpoint may draw."""
    if scorer.direct:
        return
    for prompt, ref in samples:
        for ids in (prompt, ref):
            text = scorer.gen_tok.decode(ids)
            back = scorer.roundtrip(text)
            if back != text:
                raise UsageError(f"--scorer {scorer.scorer.name}: its tokenizer cannot encode "
                                 f"the text (the text {text[:40]!r} comes back as "
                                 f"{back[:40]!r})")
    lost = _lost_tokens(scorer)
    if lost:
        i, text, back = lost[0]
        raise UsageError(f"--scorer {scorer.scorer.name}: its tokenizer cannot encode the text "
                         f"of {len(lost)} of the tokens the checkpoint may sample (id {i}, "
                         f"{text!r}, comes back as {back!r}), so their samples would be "
                         "scored as other text; give a scorer whose tokenizer carries them")


def _lost_tokens(scorer: ScoredText, chunk: int = 512) -> list[tuple[int, str, str]]:
    """(id, text, what comes back) of each token the generator may sample (not a special token
    it never draws, nor a stop, whose text is never scored) whose text the scorer's tokenizer
    does not give back; read a chunk of tokens at a time, each alone where a chunk fails."""
    tok = scorer.gen_tok
    never = {*banned_ids(tok, tok.vocab_size), *stop_ids(tok)}
    ids = [i for i in range(tok.vocab_size) if i not in never]
    lost = []
    for lo in range(0, len(ids), chunk):
        texts = [(i, tok.decode([i])) for i in ids[lo : lo + chunk]]
        whole = "".join(t for _, t in texts)
        if scorer.roundtrip(whole) == whole:
            continue
        for i, text in texts:
            back = scorer.roundtrip(text)
            if back != text:
                lost.append((i, text, back))
    return lost


def _reference(grid: EvalGrid, scorer, samples, length: int, tick) -> dict:
    t0 = time.perf_counter()
    outs = [ref for _, ref in samples]
    nlls = []
    for prompt, ref in samples:
        nlls.append(scorer.nll(prompt, ref))
        tick(1)
    row = _scored(grid, scorer, nlls, outs, length)
    return {**row, "task": "genppl", "mode": "reference", "G": None, "K": None,
            "n": len(samples), "ended_early": sum(len(ref) < length for ref in outs),
            "uncarried": 0,  # (each checked: _roundtrip)
            "seconds": time.perf_counter() - t0}


def _decoded(grid: EvalGrid, model, tokenizer, scorer, samples, length: int, d: Decoding,
             device, tick) -> dict:
    t0 = time.perf_counter()
    who, bos = {}, grid.bos
    if d.checkpoint is not None:  # a baseline decoded on the same prompts
        src = Source.read(d.checkpoint)
        _, model = load_model(src, device=device, seed=grid.settings.seed)
        who = {"checkpoint": d.checkpoint, "recipe": src.recipe.name,
               "recipe_hash": src.recipe.recipe_hash}
        bos = src.starts_with_bos()
    outs, nlls, seconds, passes, tokens, blocks, steps, early = [], [], 0.0, 0, 0, 0, 0, 0
    uncarried = 0
    # the weights read at the cell's G (the block-causal forms read it), or as a causal LM
    m = (read_as(model, d.G, model.recipe.logit_shift) if d.mode == "diffusion"
         else read_as(model, 1, False))
    cfg = DecodeConfig(length=length, G=d.G, steps=max(d.K, 1), mode=d.mode,
                       temperature=d.temperature, top_p=d.top_p, top_k=d.top_k, min_p=d.min_p,
                       repetition_penalty=d.repetition_penalty, threshold=d.threshold,
                       policy=d.policy or "confidence")
    seeds = [derive(grid.settings.seed, length, i, 11) for i in range(len(samples))]
    prompts = [begun(prompt, tokenizer, bos) for prompt, _ in samples]  # as its sequences begin
    stops = stop_ids(tokenizer)
    size = grid.settings.batch
    # --batch samples decoded together, each as alone
    for lo in range(0, len(samples), size):
        done = generate_batch(m, tokenizer, prompts[lo : lo + size], cfg, device,
                              seeds[lo : lo + size], batch=size)
        seconds += done[0].stats["generate_s"]  # the batch's, shared by its rows
        for (prompt, _), res in zip(samples[lo : lo + size], done, strict=True):
            out = _before_stop(res.token_ids, stops)
            early += len(out) < length
            uncarried += not scorer.carries(out)
            outs.append(out)
            nlls.append(scorer.nll(prompt, out))
            tick(1)
            st = res.stats
            passes += st["forward_passes"] - st["prompt_passes"]
            tokens += st["tokens"]
            blocks += st["blocks"]
            steps += st.get("steps_used", 0)
    row = _scored(grid, scorer, nlls, outs, length)
    if grid.gen.mauve:
        row["mauve"] = mauve.mauve_of(scorer, samples, outs, grid.settings.seed)
    return {**row, **who, "task": "genppl", "mode": d.mode, "G": d.G, "K": d.K,
            "policy": d.policy, "threshold": d.threshold, "temperature": d.temperature,
            "top_p": d.top_p, "top_k": d.top_k, "min_p": d.min_p,
            "repetition_penalty": d.repetition_penalty, "n": len(samples), "ended_early": early,
            "uncarried": uncarried,
            "tokens_per_s": tokens / seconds if seconds > 0 else None,
            "passes_per_token": passes / tokens if tokens else None,
            "steps_per_block": steps / blocks if blocks and d.mode == "diffusion" else None,
            "seconds": time.perf_counter() - t0}


def _before_stop(ids: list[int], stops) -> list[int]:
    """The text of `ids` before its first EOS (the EOS not scored)."""
    end = first_stop(ids, stops)
    return ids if end is None else ids[:end]


def _scored(grid: EvalGrid, scorer: ScoredText, nlls, outs, length: int) -> dict:
    """The measures every genppl row has: Gen-PPL and its interval (from each sample's
    (NLL, scorer tokens)), entropy, repeats."""
    gen = grid.gen
    nll, counts = zip(*nlls, strict=True)
    ppl, lo, hi = textstats.perplexity(list(nll), list(counts), grid.settings.seed)
    ent, ent_se = textstats.mean_se([e for e in map(textstats.unigram_entropy, outs)
                                     if e is not None])  # an empty sample has none
    reps = [r for r in (textstats.repeat_fraction(o, gen.ngram) for o in outs) if r is not None]
    row = {"data": data_name(grid.data), "length": length, "prompt_length": gen.prompt_length,
           "scorer": scorer.scorer.name,
           "scorer_window": getattr(scorer.scorer, "window", None),
           "gen_ppl": ppl, "gen_ppl_lo": lo, "gen_ppl_hi": hi, "scored_tokens": sum(counts),
           "entropy": ent, "entropy_se": ent_se,
           "repeat_ngram": sum(reps) / len(reps) if reps else None}
    return row
