"""What the model holds, from the Recipe alone: parameter counts and cache sizes per layer.

Every figure mirrors a module definition in fsc/model (no torch here). Each mixer kind's layer
is its registry entry's `MixerShape` (fsc/mixers/<kind>.py); the rest is here: RMSNorm weights,
the MoE router plus stacked experts (and a shared expert), the embedding and (untied) lm_head,
FFN hidden = int(hidden_ratio × d_model) or the recipe's explicit width; SwiGLU has three
matrices.
Parameters are stored in recipe.dtype, KV caches in recipe.dtype, recurrent states in state_dtype,
except linear attention's un-decayed sums: fp32 always.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

from fsc.dtypes import DTYPE_BYTES

if TYPE_CHECKING:
    from fsc.mixers.spec import MixerShape
    from fsc.recipe import Recipe


@dataclass(frozen=True)
class ByteParts:
    """A byte count in named parts (the fields); `total_bytes` is their sum. `as_dict()` is the
    parts then the total, as JSON output shows them."""

    @property
    def total_bytes(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "total_bytes": self.total_bytes}


@dataclass(frozen=True)
class CacheBytes(ByteParts):
    """Bytes of a cache: the parts that grow with S (attention K/V) and the fixed states."""

    kv_bytes: int
    state_bytes: int


@dataclass(frozen=True)
class FfnShape:
    """The MLP or MoE block of every layer. An MoE token runs top_k of n_experts experts and,
    when there is one, the shared expert (width `shared`, its gate a [d, 1] projection)."""

    kind: str  # "mlp" | "moe"
    d_model: int
    hidden: int
    n_experts: int = 1
    top_k: int = 1
    matrices: int = 2  # up [d, hidden] + down [hidden, d]; SwiGLU adds gate [d, hidden]
    shared: int = 0
    shared_gate: bool = False

    @property
    def expert_params(self) -> int:
        return self.matrices * self.d_model * self.hidden

    @property
    def router_params(self) -> int:
        return self.d_model * self.n_experts if self.kind == "moe" else 0

    @property
    def shared_params(self) -> int:
        """The shared expert and its gate: read and run for every token."""
        return self.matrices * self.d_model * self.shared + (self.d_model if self.shared_gate else 0)

    @property
    def params(self) -> int:
        return self.router_params + self.n_experts * self.expert_params + self.shared_params

    def experts_read(self, tokens: int) -> int:
        """Experts whose weights one pass over `tokens` tokens reads, at most (every token routed
        to experts no other token chose), bounded by all experts."""
        return min(self.n_experts, tokens * self.top_k) if self.kind == "moe" else 1


def ffn_shape(recipe: Recipe) -> FfnShape:
    d = recipe.d_model
    if recipe.moe is not None:
        moe = recipe.moe
        return FfnShape("moe", d, moe.width(d), moe.n_experts, moe.top_k,
                        3 if moe.kind == "swiglu" else 2, moe.shared_hidden or 0, moe.shared_gate)
    mlp = recipe.mlp_cfg
    return FfnShape("mlp", d, mlp.width(d), matrices=3 if mlp.kind == "swiglu" else 2)


def embedding_params(recipe: Recipe) -> int:
    """The embedding and the lm_head, or the one matrix both use when tied."""
    return (1 if recipe.tie_embeddings else 2) * recipe.vocab_size * recipe.d_model


def norm_params(recipe: Recipe) -> int:
    """norm1 and (with an FFN) norm2 per layer, and norm_f."""
    per_layer = 1 if recipe.mlp_cfg is not None and recipe.mlp_cfg.kind == "none" else 2
    return (per_layer * recipe.n_layers + 1) * recipe.d_model


def kind_shapes(recipe: Recipe) -> list[tuple[MixerShape, int]]:
    """Each mixer kind's shape with its number of layers, kinds in order of first appearance.
    Every sum over layers is a sum over these (count × per-kind figure), never a loop per layer."""
    return [(recipe.mixer_shape(kind), n) for kind, n in recipe.layer_counts.items()]


PASSES = ("uncached", "fold", "two-stream")


def masked_layers(recipe: Recipe, G: int, kind: str = "uncached") -> int:
    """Attention layers of `recipe` that read a [queries, keys] mask in a pass of `kind` in
    blocks of G (fsc.model.attention): the uncached pass (`LM.forward_blockwise`) all but
    those that read blocks of one token with no window (the causal kernel needs none); a fold
    into the cache (decoding's prefill) those without a window that read blocks of G > 1 (a
    windowed one folds block by block); the two-stream pass of the blocks bound, all."""
    if kind not in PASSES:
        raise ValueError(f"pass {kind!r} is not one of {', '.join(PASSES)}")

    def reads(window: int | None) -> bool:
        if kind == "fold":
            return G > 1 and window is None
        return kind == "two-stream" or G > 1 or window is not None

    return sum(n for shape, n in kind_shapes(recipe)
               if shape.attn_flops_per_pair and reads(shape.window))


def param_counts(recipe: Recipe) -> dict[str, int]:
    """Parameters per component kind and in total; the same keys and values as
    `fsc.model.lm.count_params(build_model(recipe))`."""
    counts: dict[str, int] = {"embedding": embedding_params(recipe)}
    for shape, n in kind_shapes(recipe):
        counts[shape.kind] = n * shape.params
    ffn = ffn_shape(recipe)
    if ffn.hidden:
        counts[ffn.kind] = recipe.n_layers * ffn.params
    counts["norm"] = norm_params(recipe)
    counts["total"] = sum(counts.values())
    return counts


def cache_dtype(recipe: Recipe, shape: MixerShape) -> str:
    """The dtype a layer's cache is held in: the mixer's own when it fixes one, else the
    recipe's dtype for a growing (K/V) cache and its state_dtype for a fixed one."""
    return shape.cache_dtype or (recipe.dtype if shape.growing else recipe.state_dtype)


def shape_tensor_bytes(recipe: Recipe, shape: MixerShape, batch: int,
                       capacity: int) -> dict[str, int]:
    """Bytes of each cache tensor of one layer (the names of Mixer.cache_shapes)."""
    size = DTYPE_BYTES[cache_dtype(recipe, shape)]
    return {name: batch * (per_token * capacity + fixed) * size
            for name, (per_token, fixed) in shape.cache.items()}


def tensor_bytes(recipe: Recipe, kind: str, batch: int, capacity: int) -> dict[str, int]:
    """Bytes of each cache tensor of one `kind` layer, e.g. {"conv": ..., "ssm": ...}."""
    return shape_tensor_bytes(recipe, recipe.mixer_shape(kind), batch, capacity)


def cache_bytes(recipe: Recipe, batch: int, S: int) -> CacheBytes:
    """Exact bytes of a cache holding S tokens (capacity S); equals `LM.cache_bytes(batch, S)`."""
    kv = state = 0
    for shape, n in kind_shapes(recipe):
        layer = sum(shape_tensor_bytes(recipe, shape, batch, S).values())
        if shape.growing:
            kv += n * layer
        else:
            state += n * layer
    return CacheBytes(kv, state)
