"""What the model holds, from the Recipe alone: parameter counts and cache sizes per layer.

Every figure mirrors a module definition in fsc/model (no torch here): `nn.Linear` without bias
except GLA's gate `wg`; RMSNorm weights; Mamba-2's conv weight and bias, A_log, dt_bias, D; the MoE
router plus stacked experts; untied embedding and lm_head; FFN hidden = int(hidden_ratio × d_model).
Parameters are stored in recipe.dtype, KV caches in recipe.dtype, recurrent states in state_dtype,
except linear attention's un-decayed sums: fp32 always.
"""

from __future__ import annotations

from dataclasses import dataclass

from fsc.recipe import DTYPE_BYTES, Recipe


@dataclass(frozen=True)
class MixerShape:
    """One mixer kind of a recipe.

    linears: (in_features, out_features) of each projection (2 FLOPs per weight per token).
    extra_params: parameters outside the projections (biases, conv, A_log, dt_bias, D).
    cache: element count per sequence of each cache tensor, as (per_token, fixed): a tensor of
        per_token · capacity + fixed elements per sequence. Attention's are per token (growing);
        the recurrent mixers' are fixed.
    scan_flops_per_token: FLOPs of the recurrence (and conv) per token, both directions.
    attn_flops_per_pair: FLOPs per (query token, key position) pair: QKᵀ and PV, 2 each per MAC.
    cache_dtype: the dtype of its cache when the mixer fixes it, whatever the recipe says.
    """

    kind: str
    linears: tuple[tuple[int, int], ...]
    extra_params: int
    cache: dict[str, tuple[int, int]]
    scan_flops_per_token: int = 0
    attn_flops_per_pair: int = 0
    cache_dtype: str | None = None

    @property
    def params(self) -> int:
        return sum(i * o for i, o in self.linears) + self.extra_params

    @property
    def growing(self) -> bool:
        return any(per_token for per_token, _ in self.cache.values())


def mixer_shape(recipe: Recipe, kind: str) -> MixerShape:
    d = recipe.d_model
    if kind == "attention":
        a = recipe.attention
        h, hkv = a.n_heads, a.n_kv_heads or a.n_heads
        hd = a.head_dim or d // h
        # k, v: [B, capacity, Hkv, D]
        kv = (hkv * hd, 0)
        return MixerShape(kind, ((d, h * hd), (d, hkv * hd), (d, hkv * hd), (h * hd, d)), 0,
                          {"k": kv, "v": kv}, attn_flops_per_pair=4 * h * hd)
    if kind == "mamba":
        m = recipe.mamba
        d_inner = m.expand * d
        n_heads = d_inner // m.head_dim
        conv_dim = d_inner + 2 * m.d_state  # x, B, C go through the conv
        # in_proj -> z | x, B, C | dt; conv weight [C, W] + bias [C]; A_log, dt_bias, D [H]
        linears = ((d, d_inner + conv_dim + n_heads), (d_inner, d))
        extra = conv_dim * m.d_conv + conv_dim + 3 * n_heads
        # conv window [B, C, W-1]; ssm [B, H, P, N] with H·P = d_inner
        cache = {"conv": (0, conv_dim * (m.d_conv - 1)), "ssm": (0, d_inner * m.d_state)}
        # per direction per state element: decay multiply and dt·x·B outer-product add (3),
        # C readout (2)
        scan = 2 * 5 * d_inner * m.d_state + 2 * conv_dim * m.d_conv
        return MixerShape(kind, linears, extra, cache, scan_flops_per_token=scan)
    if kind == "linear":
        c = recipe.linear
        h = c.n_heads
        dv = d // h
        r = c.feature_dim or dv
        linears = ((d, h * r), (d, h * r), (d, h * dv), (h * dv, d))
        # state [B, H, r, Dv], z [B, H, r]; fp32 (sums without decay drift in 16 bits)
        cache = {"state": (0, h * r * dv), "z": (0, h * r)}
        # per head: φ(k)vᵀ add (2·r·Dv), z add (r), q·S readout (2·r·Dv), q·z (2·r)
        return MixerShape(kind, linears, 0, cache, scan_flops_per_token=h * (4 * r * dv + 3 * r),
                          cache_dtype="fp32")
    if kind == "gla":
        g = recipe.gla
        h = g.n_heads
        hd = g.head_dim or d // h
        linears = ((d, h * hd),) * 4 + ((h * hd, d),)  # wq, wk, wv, wg, wo
        # state [B, H, Dk, Dv]; per direction per element: gate, k vᵀ add (3), q readout (2)
        return MixerShape(kind, linears, h * hd, {"state": (0, h * hd * hd)},
                          scan_flops_per_token=h * 2 * 5 * hd * hd)
    raise ValueError(f"unknown mixer kind {kind!r}")


@dataclass(frozen=True)
class FfnShape:
    """The MLP or MoE block of every layer. An MoE token runs top_k of n_experts experts."""

    kind: str  # "mlp" | "moe"
    d_model: int
    hidden: int
    n_experts: int = 1
    top_k: int = 1

    @property
    def expert_params(self) -> int:
        return 2 * self.d_model * self.hidden  # up [d, hidden] + down [hidden, d]

    @property
    def router_params(self) -> int:
        return self.d_model * self.n_experts if self.kind == "moe" else 0

    @property
    def params(self) -> int:
        return self.router_params + self.n_experts * self.expert_params

    def experts_read(self, tokens: int) -> int:
        """Experts whose weights one pass over `tokens` tokens reads, at most (every token routed
        to experts no other token chose), bounded by all experts."""
        return min(self.n_experts, tokens * self.top_k) if self.kind == "moe" else 1


def ffn_shape(recipe: Recipe) -> FfnShape:
    d = recipe.d_model
    if recipe.moe is not None:
        moe = recipe.moe
        return FfnShape("moe", d, int(moe.hidden_ratio * d), moe.n_experts, moe.top_k)
    return FfnShape("mlp", d, int(recipe.mlp_cfg.hidden_ratio * d))


def kind_shapes(recipe: Recipe) -> list[tuple[MixerShape, int]]:
    """Each mixer kind's shape with its number of layers, kinds in order of first appearance.
    Every sum over layers is a sum over these (count × per-kind figure), never a loop per layer."""
    return [(mixer_shape(recipe, kind), n) for kind, n in recipe.layer_counts.items()]


def param_counts(recipe: Recipe) -> dict[str, int]:
    """Parameters per component kind and in total; the same keys and values as
    `fsc.model.lm.count_params(build_model(recipe))`."""
    d = recipe.d_model
    counts: dict[str, int] = {"embedding": 2 * recipe.vocab_size * d}  # untied embed + lm_head
    for shape, n in kind_shapes(recipe):
        counts[shape.kind] = n * shape.params
    ffn = ffn_shape(recipe)
    counts[ffn.kind] = recipe.n_layers * ffn.params
    counts["norm"] = (2 * recipe.n_layers + 1) * d  # norm1, norm2 per layer, norm_f
    counts["total"] = sum(counts.values())
    return counts


def shape_tensor_bytes(recipe: Recipe, shape: MixerShape, batch: int,
                       capacity: int) -> dict[str, int]:
    """Bytes of each cache tensor of one layer (the names of Mixer.cache_shapes)."""
    size = DTYPE_BYTES[shape.cache_dtype or (recipe.dtype if shape.growing else recipe.state_dtype)]
    return {name: batch * (per_token * capacity + fixed) * size
            for name, (per_token, fixed) in shape.cache.items()}


def tensor_bytes(recipe: Recipe, kind: str, batch: int, capacity: int) -> dict[str, int]:
    """Bytes of each cache tensor of one `kind` layer, e.g. {"conv": ..., "ssm": ...}."""
    return shape_tensor_bytes(recipe, mixer_shape(recipe, kind), batch, capacity)


def cache_bytes(recipe: Recipe, batch: int, S: int) -> dict[str, int]:
    """Exact bytes of a cache holding S tokens (capacity S); equals `LM.cache_bytes(batch, S)`."""
    kv = state = 0
    for shape, n in kind_shapes(recipe):
        layer = sum(shape_tensor_bytes(recipe, shape, batch, S).values())
        if shape.growing:
            kv += n * layer
        else:
            state += n * layer
    return {"kv_bytes": kv, "state_bytes": state, "total_bytes": kv + state}
