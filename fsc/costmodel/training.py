"""Memory of one training step, from the Recipe alone (pure arithmetic, as the rest of the cost
model): `fsc train` refuses a run that cannot fit before it prepares any data.

The step trains in fp32 with AdamW over the block-causal forward (`LM.forward_blockwise`) of
`batch` sequences of `seq_len` tokens. Counted, per the model code:
- state: weights, gradients and AdamW's two moments, 4 fp32 copies of every parameter;
- activations kept for the backward pass, per layer and token: the residual stream, the two
  norms' outputs and the mixer's output (4·d_model), every mixer projection's output, and the
  MLP's hidden activations before and after the nonlinearity (2·top_k·hidden);
- recurrent mixers: the state carried into each block (their cache's fixed part per block);
- attention: the boolean mask each attention layer that reads one builds and keeps
  (`masked_layers`): T × T block-causal (frontier), none where the causal kernel reads blocks
  of one token (ar, no window), and the blocks bound's two streams: the clean T × T and the
  noised stream's [batch, K·G, T + K·G] for the K blocks it scores, at least one (text, where
  every block is supervised, scores all: K·G = T);
- the head: fp32 logits of every position and their gradient (an upper bound: the objectives
  score only some positions).
Temporaries of a single op, the allocator's slack and the framework are not counted, so the
figure is a floor a step cannot go under, not a prediction of its peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fsc.costmodel.shapes import ByteParts, ffn_shape, kind_shapes, masked_layers, param_counts

if TYPE_CHECKING:
    from fsc.recipe import Recipe

FP32 = 4
ADAMW_COPIES = 4  # weights, gradients, exp_avg, exp_avg_sq


@dataclass(frozen=True)
class TrainingMemory(ByteParts):
    """Bytes of one training step (`total_bytes`: their sum)."""

    state_bytes: int  # weights, gradients, optimizer
    activation_bytes: int
    mask_bytes: int  # attention
    logits_bytes: int


def training_memory(recipe: Recipe, seq_len: int, batch: int,
                    objective: str = "frontier") -> TrainingMemory:
    """Bytes of one training step at (seq_len, batch) of `objective` (fsc.train.config.OBJECTIVES:
    frontier, blocks or ar)."""
    d, tokens = recipe.d_model, batch * seq_len
    ffn = ffn_shape(recipe)
    blocks = -(-seq_len // max(recipe.block_size, 1))
    per_token = states = 0
    for shape, n in kind_shapes(recipe):
        per_token += n * (4 * d + sum(o for _, o in shape.linears)
                          + 2 * ffn.top_k * ffn.hidden)
        if not shape.attn_flops_per_pair:
            states += n * sum(fixed for _, fixed in shape.cache.values())
    pairs = seq_len * seq_len  # one bool per (query, key) pair
    G = recipe.block_size
    masks = {"ar": masked_layers(recipe, 1) * pairs,  # a floor: one block noised (blocks)
             "blocks": masked_layers(recipe, G, "two-stream") * (pairs + batch * G * (seq_len + G))
             }.get(objective, masked_layers(recipe, G) * pairs)
    state = ADAMW_COPIES * FP32 * param_counts(recipe)["total"]
    activations = FP32 * (tokens * per_token + batch * blocks * states)
    logits = 2 * FP32 * tokens * recipe.vocab_size
    return TrainingMemory(state, activations, masks, logits)
