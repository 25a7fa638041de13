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
- samples that ended at EOS before `length` (`ended_early`; scored on what they hold).

A reference row (mode `reference`) scores the validation text's own continuations of the same
prompts under the same scorer, so a reader sees how far the samples are from real text.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import torch

from fsc.decode import DecodeConfig, generate
from fsc.errors import UsageError
from fsc.eval import mauve, textstats
from fsc.eval.grid import Decoding, EvalGrid
from fsc.eval.scorers import ScoredText, load_scorer
from fsc.loading import load_model
from fsc.model.lm import reading
from fsc.source import load_source_recipe
from fsc.train.data import TextData, open_data
from fsc.train.tasks import derive


def text_tokens(grid: EvalGrid, tokenizer, length: int):
    """The validation text's tokens (a shipped corpus's val split, or a text file)."""
    P = grid.gen.prompt_length
    source = open_data(grid.data, tokenizer, P + length, 1, grid.settings.seed, grid.options,
                       option="--lengths", split="val")
    if not isinstance(source, TextData):
        raise UsageError(f"--data {grid.data}: genppl draws its prompts and reference text "
                         "from natural text (shakespeare or a .txt/.jsonl/.parquet file)")
    return source.tokens


def check(grid: EvalGrid, tokenizer) -> None:
    """UsageError, before any model is loaded, for data genppl cannot draw from."""
    if grid.data is None:
        raise UsageError("--task genppl needs --data (shakespeare or a text file) for its "
                         "prompts and reference text")
    for n in grid.lengths:
        text_tokens(grid, tokenizer, n)
    if grid.gen.prompt_length == 0 and getattr(tokenizer, "bos_id", None) is None:
        raise UsageError("--prompt-length 0 starts from BOS, which the tokenizer lacks")


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


@torch.no_grad()
def measure(model, tokenizer, grid: EvalGrid, lengths, device) -> Iterator[dict]:
    gen = grid.gen
    scorer = ScoredText(load_scorer(gen.scorer, device, grid.settings.seed), tokenizer)
    for length in lengths:
        samples = draws(grid, text_tokens(grid, tokenizer, length), length)
        _roundtrip(scorer, samples)
        yield _reference(grid, tokenizer, scorer, samples, length)
        for d in gen.decodings:
            yield _decoded(grid, model, tokenizer, scorer, samples, length, d, device)


def _roundtrip(scorer: ScoredText, samples) -> None:
    """UsageError when the scorer's tokenizer cannot carry the text (it would score another)."""
    if scorer.direct:
        return
    text = scorer.gen_tok.decode(samples[0][1])
    back = scorer.scorer.tokenizer.decode(scorer.scorer.tokenizer.encode(text))
    if back != text:
        raise UsageError(f"--scorer {scorer.scorer.name}: its tokenizer cannot encode the "
                         f"samples (the text {text[:40]!r} comes back as {back[:40]!r})")


def _reference(grid: EvalGrid, tokenizer, scorer, samples, length: int) -> dict:
    t0 = time.perf_counter()
    outs = [ref for _, ref in samples]
    row = _scored(grid, scorer, [p for p, _ in samples], outs, length)
    return {**row, "task": "genppl", "mode": "reference", "G": None, "K": None,
            "n": len(samples), "ended_early": 0, "seconds": time.perf_counter() - t0}


def _decoded(grid: EvalGrid, model, tokenizer, scorer, samples, length: int, d: Decoding,
             device) -> dict:
    t0 = time.perf_counter()
    who = {}
    if d.checkpoint is not None:  # a baseline decoded on the same prompts
        recipe = load_source_recipe(d.checkpoint)
        _, model = load_model(d.checkpoint, device=device, seed=grid.settings.seed)
        who = {"checkpoint": d.checkpoint, "recipe": recipe.name,
               "recipe_hash": recipe.recipe_hash}
    outs, seconds, passes, tokens, blocks, steps, early = [], 0.0, 0, 0, 0, 0, 0
    # the recipe at the cell's G (the block-causal forms read it), or read as a causal LM
    at = (model.recipe.model_copy(update={"block_size": d.G}) if d.mode == "diffusion"
          else model.recipe.as_autoregressive())
    with reading(model, at) as m:
        for i, (prompt, _) in enumerate(samples):
            cfg = DecodeConfig(length=length, G=d.G, steps=max(d.K, 1), mode=d.mode,
                               temperature=d.temperature, top_p=d.top_p, threshold=d.threshold,
                               policy=d.policy or "confidence",
                               seed=derive(grid.settings.seed, length, i, 11))
            ids = prompt or [tokenizer.bos_id]
            res = generate(m, tokenizer, ids, cfg, device=device)
            out = res.token_ids
            eos = getattr(tokenizer, "eos_id", None)
            if eos is not None and eos in out:
                out = out[: out.index(eos)]
            early += len(out) < length
            outs.append(out)
            st = res.stats
            seconds += st["seconds"]
            passes += st["forward_passes"] - st["prompt_passes"]
            tokens += st["tokens"]
            blocks += st["blocks"]
            steps += st.get("steps_used", 0)
    row = _scored(grid, scorer, [p for p, _ in samples], outs, length)
    if grid.gen.mauve:
        row["mauve"] = mauve.mauve_of(scorer, samples, outs, grid.settings.seed)
    return {**row, **who, "task": "genppl", "mode": d.mode, "G": d.G, "K": d.K,
            "policy": d.policy, "threshold": d.threshold, "temperature": d.temperature,
            "top_p": d.top_p, "n": len(samples), "ended_early": early,
            "tokens_per_s": tokens / seconds if seconds > 0 else None,
            "passes_per_token": passes / tokens if tokens else None,
            "steps_per_block": steps / blocks if blocks and d.mode == "diffusion" else None,
            "seconds": time.perf_counter() - t0}


def _scored(grid: EvalGrid, scorer: ScoredText, prompts, outs, length: int) -> dict:
    """The measures every genppl row has: Gen-PPL and its interval, entropy, repeats."""
    gen = grid.gen
    nll, counts = zip(*(scorer.nll(p, o) for p, o in zip(prompts, outs)), strict=True)
    ppl, lo, hi = textstats.perplexity(list(nll), list(counts), grid.settings.seed)
    ent, ent_se = textstats.mean_se([textstats.unigram_entropy(o) for o in outs])
    reps = [r for r in (textstats.repeat_fraction(o, gen.ngram) for o in outs) if r is not None]
    row = {"length": length, "prompt_length": gen.prompt_length, "scorer": scorer.scorer.name,
           "gen_ppl": ppl, "gen_ppl_lo": lo, "gen_ppl_hi": hi, "scored_tokens": sum(counts),
           "entropy": ent, "entropy_se": ent_se,
           "repeat_ngram": sum(reps) / len(reps) if reps else None}
    return row
