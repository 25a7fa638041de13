"""Decoding: block diffusion (G tokens, K denoising steps, then a fold) and the AR baseline.

Block diffusion, per block: start from G mask tokens; each of the K steps is one forward pass of
the block against the cache (the cache is not changed); after each step some masked positions
are revealed, then one fold writes the finished block into the cache. Which ones: the policy
ranks the masked positions (`confidence`: the probability of the token sampled there;
`margin`: top-1 minus top-2 probability; `entropy`: lowest entropy first; `random`: a seeded
order, from a stream of its own, so that where the order cannot matter (K = 1) the samples are
every other policy's: LLaDA's random remasking, and at K = G BD3-LM's first-hitting sampler),
and the best are revealed on an even schedule over the K steps: step k (from 0) reveals
floor((k+1)G/K) - floor(kG/K), the larger counts last where K does not divide G (LLaDA's and
Fast-dLLM's schedules put them first: at G 4, K 3 they reveal 2, 1, 1 where fsc reveals 1, 1,
2). The probabilities a policy and a threshold read are the model's own (softmax of the
logits at temperature 1, after the repetition penalty and the banned ids, before top-k,
top-p and min-p), as LLaDA's and Fast-dLLM's low-confidence remasking reads them; only the
token drawn follows the temperature and the cuts (Dream ranks by the cut distribution, where
a low temperature or top-k 1 makes every confidence ~1 and the order a matter of ties). So
greedy decoding, top-k 1 and a temperature near 0 reveal in one order. With a threshold τ
(adaptive parallel decoding, Fast-dLLM) a step reveals every masked position whose sampled
token is at least τ probable, and at least as many, in the policy's order, as keep the block
on the even schedule's finish: one, or more where the schedule's later steps would leave some
masked (a τ that no position reaches reveals as the even schedule does, 1, 1, 2 at G 4, K 3;
a block ahead of it reveals one a step), so the steps adapt (Fast-dLLM: at least one a step,
the steps unbounded). Tokens are sampled in float64: categorical sampling in low
precision lowers entropy (arXiv 2409.02908). `use_cache=False` recomputes the whole prefix
with the block-causal forward at every step instead (the uncached reference and speed
baseline).

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
(fsc.decode.denoise.Steps, fsc.graphs), and the first decode of a model in a process
warms up first (`warmed`).

The prompt is folded by `prefill`: in passes of at most `prefill_chunk` tokens (whole blocks,
`LM.fold_blocks` each), so that a long prompt's activations, and attention's mask of which
token reads which, are those of one chunk against the prefix, not of the whole prompt.

The package: `config` (DecodeConfig, DecodeResult, the input checks), `sampler` (the pick:
`Picker` on the logits' device, `HostPicker`/`pick_ref` its host reference), `denoise` (a
block's K steps: forward, pick, reveal; replayed whole on CUDA), `engine` (`generate_batch`,
`generate`, `prefill`: the cached decoder) and `reference` (the uncached single-sequence
decoder, its exactness oracle). fsc.graphs, which `fsc profile` shares, holds the captures.
"""

from fsc.decode.config import PREFILL_CHUNK, SAMPLERS, DecodeConfig, DecodeResult
from fsc.decode.denoise import Steps, denoise, even_schedule
from fsc.decode.engine import (
           batches,
           chunk_tokens,
           folding,
           generate,
           generate_batch,
           prefill,
           ragged_ok,
           warm_up,
)
from fsc.decode.sampler import HostPicker, Picker, banned_ids, pick_ref, picker

__all__ = ["PREFILL_CHUNK", "SAMPLERS", "DecodeConfig", "DecodeResult", "HostPicker", "Picker",
           "Steps", "banned_ids", "batches", "chunk_tokens", "denoise", "even_schedule", "folding",
           "generate", "generate_batch", "pick_ref", "picker", "prefill", "ragged_ok", "warm_up"]
