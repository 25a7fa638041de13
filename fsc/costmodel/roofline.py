"""Bytes moved, FLOPs and memory of one forward pass, and the roofline floor time.

A pass runs the G-token frontier block of B sequences (T = B·G tokens) against a cache of S
tokens. A *step* reads the cache; a *fold* is the same pass that also writes the block into it.
Weights are read once per pass (they serve all T tokens); every sequence reads its own cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fsc.costmodel.devices import DeviceSpec
from fsc.costmodel.shapes import (
    ByteParts,
    cache_bytes,
    ffn_shape,
    kind_shapes,
    masked_layers,
    norm_params,
    param_counts,
    shape_tensor_bytes,
)
from fsc.dtypes import DTYPE_BYTES
from fsc.errors import UsageError

if TYPE_CHECKING:
    from fsc.recipe import Recipe


@dataclass(frozen=True)
class PassCost:
    """Bytes (exact integers) and FLOPs of one forward pass."""

    weight_bytes: int  # weights read: all but unchosen experts and unused embedding rows
    kv_read_bytes: int  # the S-token prefix K/V of every attention layer
    state_read_bytes: int  # every recurrent state and conv window; a ring's min(S, W) slots
    cache_write_bytes: int  # fold only: G new K/V positions (a ring's min(G, W)), states in full
    activation_bytes: int  # each projection reads its input and writes its output once
    matmul_flops: int  # 2 per weight per token through it
    attention_flops: int  # 4·T·(min(S, window)+G)·H·D per attention layer
    scan_flops: int  # recurrences and short convs

    @property
    def bytes(self) -> int:
        return (self.weight_bytes + self.kv_read_bytes + self.state_read_bytes
                + self.cache_write_bytes + self.activation_bytes)

    @property
    def flops(self) -> int:
        return self.matmul_flops + self.attention_flops + self.scan_flops

    def floor(self, spec: DeviceSpec) -> tuple[float, str]:
        """Floor time in seconds, max(bytes / bandwidth, FLOPs / peak), and which bound applies."""
        t_mem = self.bytes / spec.bandwidth_bytes_per_s
        t_math = self.flops / spec.peak_flops
        return (t_mem, "memory") if t_mem >= t_math else (t_math, "compute")


def check_point(S: int, B: int, G: int, K: int = 1, k_min: int = 0) -> None:
    """UsageError unless S >= 0, B >= 1, G >= 1, K >= k_min."""
    for name, value, low in (("S", S, 0), ("B", B, 1), ("G", G, 1), ("K (--steps)", K, k_min)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UsageError(f"{name} must be an integer >= {low} (got {value!r})")


def pass_cost(recipe: Recipe, S: int, B: int, G: int, fold: bool = False) -> PassCost:
    act = DTYPE_BYTES[recipe.dtype]
    d, V, T = recipe.d_model, recipe.vocab_size, B * G
    shapes, ffn = kind_shapes(recipe), ffn_shape(recipe)
    mixer_params = sum(n * s.params for s, n in shapes)
    linear_weights = sum(n * i * o for s, n in shapes for i, o in s.linears) + d * V  # + lm_head
    norms = norm_params(recipe)
    ffn_read = ffn.router_params + ffn.experts_read(T) * ffn.expert_params + ffn.shared_params
    # the embedding rows of the pass's tokens, then the head's whole matrix (tied: one read)
    embed_read = V * d if recipe.tie_embeddings else min(T, V) * d + V * d
    weights = mixer_params + norms + embed_read + recipe.n_layers * ffn_read

    kv_read = state_read = write = 0
    for s, n in shapes:
        if s.growing:
            kv_read += n * sum(shape_tensor_bytes(recipe, s, B, S).values())
            write += n * sum(shape_tensor_bytes(recipe, s, B, G).values())
        elif s.window is not None:  # a ring of W slots: a block reads the last min(S, W)
            # positions and a fold writes its last min(G, W), never the whole ring
            slot = sum(shape_tensor_bytes(recipe, s, B, 0).values()) // s.window
            state_read += n * slot * min(S, s.window)
            write += n * slot * min(G, s.window)
        else:
            state = n * sum(shape_tensor_bytes(recipe, s, B, 0).values())
            state_read += state
            write += state

    # Per token: each projection's input and output; the MoE token visits top_k experts, the
    # shared one and its gate.
    ffn_io = (ffn.top_k * ffn.matrices * (d + ffn.hidden) if ffn.hidden else 0) + (
        d + ffn.n_experts if ffn.kind == "moe" else 0) + (
        ffn.matrices * (d + ffn.shared) if ffn.shared else 0) + (d + 1 if ffn.shared_gate else 0)
    io = d + sum(n * (i + o) for s, n in shapes for i, o in s.linears) + recipe.n_layers * ffn_io + d + V
    ffn_macs = ffn.router_params + ffn.top_k * ffn.expert_params + ffn.shared_params
    return PassCost(
        weight_bytes=weights * act,
        kv_read_bytes=kv_read,
        state_read_bytes=state_read,
        cache_write_bytes=write if fold else 0,
        activation_bytes=T * io * act,
        matmul_flops=2 * T * (linear_weights + recipe.n_layers * ffn_macs),
        attention_flops=T * sum(n * s.attn_flops_per_pair * (min(S, s.window or S) + G)
                                for s, n in shapes),
        scan_flops=T * sum(n * s.scan_flops_per_token for s, n in shapes),
    )


@dataclass(frozen=True)
class Memory(ByteParts):
    """Device memory of a decoding point in three parts, in bytes (`total_bytes`: their sum).
    The CUDA context and allocator slack are not included."""

    weight_bytes: int  # every parameter in recipe.dtype
    cache_capacity_bytes: int  # the cache with room for S + G tokens (the block being folded)
    # The live set of one pass with fused mixer kernels: residual stream and its norm, the widest
    # layer intermediate, and the logits in recipe.dtype plus their fp32 copy.
    activation_bytes: int


def _live_per_token(recipe: Recipe) -> int:
    """Bytes a pass holds per token, the head aside: the residual stream and its norm, and the
    widest layer intermediate."""
    ffn = ffn_shape(recipe)
    widest = max([sum(o for _, o in s.linears) for s, _ in kind_shapes(recipe)]
                 + [(ffn.matrices - 1) * (ffn.top_k * ffn.hidden + ffn.shared)
                    + (ffn.n_experts if ffn.kind == "moe" else 0)])
    return (2 * recipe.d_model + widest) * DTYPE_BYTES[recipe.dtype]


def _logits_bytes(recipe: Recipe, tokens: int) -> int:
    """The logits of `tokens` tokens in recipe.dtype and their fp32 copy."""
    return tokens * recipe.vocab_size * (DTYPE_BYTES[recipe.dtype] + 4)


def memory(recipe: Recipe, S: int, B: int, G: int) -> Memory:
    """Device memory of a decoding point at S cached tokens, B sequences, block size G."""
    T = B * G
    weight_bytes = param_counts(recipe)["total"] * DTYPE_BYTES[recipe.dtype]
    cache = cache_bytes(recipe, B, S + G).total_bytes
    return Memory(weight_bytes, cache, T * _live_per_token(recipe) + _logits_bytes(recipe, T))


MASK_BYTES_PER_PAIR = 5  # a masked attention pass: its boolean mask and the fp32 copy SDPA makes


def prompt_memory(recipe: Recipe, P: int, B: int, G: int, chunk: int = 0) -> Memory:
    """Device memory of folding a P-token prompt of B sequences in blocks of G
    (`LM.fold_blocks`, decoding's prefill), into a cache with room for P + G tokens, in passes
    of `chunk` tokens (fsc.decode.prefill; 0: one pass of all P): the largest pass's live set
    over B·chunk tokens (the head reads the last token alone) and, where attention without a
    window reads blocks of G > 1, its chunk × P mask of which token sees which (the last
    chunk against the whole prompt), held as booleans and as the fp32 copy attention makes of
    it (one layer's at a time)."""
    masked = masked_layers(recipe, G, "fold") > 0
    C = P if not chunk or chunk >= P else max(G, chunk // G * G)  # fsc.decode.chunk_tokens
    activations = (B * C * _live_per_token(recipe) + _logits_bytes(recipe, B)
                   + (MASK_BYTES_PER_PAIR * C * P if masked else 0))
    return Memory(memory(recipe, P, B, G).weight_bytes, cache_bytes(recipe, B, P + G).total_bytes,
                  activations)


def max_batch(recipe: Recipe, S: int, G: int, memory_bytes: int) -> int:
    """The largest B whose point fits `memory_bytes` (0: not even one sequence).
    Memory is weights plus a per-sequence part exactly linear in B."""
    one = memory(recipe, S, 1, G)
    free = memory_bytes - one.weight_bytes
    per_seq = one.total_bytes - one.weight_bytes
    return free // per_seq if free >= 0 else 0


def oom_context(recipe: Recipe, B: int, G: int, memory_bytes: int) -> int | None:
    """The smallest S that no longer fits `memory_bytes` at batch B: 0 when not even an empty
    cache fits, None when memory never runs out (no growing cache and S = 0 fits)."""
    at0 = memory(recipe, 0, B, G).total_bytes
    if at0 > memory_bytes:
        return 0
    per_token = memory(recipe, 1, B, G).total_bytes - at0  # B · KV bytes per token
    if per_token == 0:
        return None
    return (memory_bytes - at0) // per_token + 1
