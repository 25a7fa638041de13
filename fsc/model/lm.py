"""The language model: embedding → [norm → mixer, norm → MLP/MoE] × n_layers → norm → head."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from fsc.blocks import blocks_of
from fsc.costmodel.shapes import CacheBytes
from fsc.model import MIXER_REGISTRY
from fsc.model.cache import Carry, ModelCache
from fsc.model.layers import MLP, TORCH_DTYPES, MoE, RMSNorm, SwiGLU, init_parameter
from fsc.recipe import Recipe


class Layer(nn.Module):
    def __init__(self, recipe: Recipe, kind: str, dtype, state_dtype):
        super().__init__()
        self.norm1 = RMSNorm(recipe.d_model, recipe.norm_eps, recipe.norm_offset)
        self.mixer = MIXER_REGISTRY[kind](recipe, dtype, state_dtype)
        d, mlp, moe = recipe.d_model, recipe.mlp_cfg, recipe.moe
        if mlp is not None and mlp.kind == "none":  # norm → mixer only (Mamba-2 stacks)
            self.norm2 = self.ffn = None
            return
        self.norm2 = RMSNorm(d, recipe.norm_eps, recipe.norm_offset)
        if moe is not None:
            self.ffn = MoE(d, moe.width(d), moe.n_experts, moe.top_k, moe.kind == "swiglu",
                           moe.shared_hidden, moe.shared_gate)
        else:
            self.ffn = (SwiGLU if mlp.kind == "swiglu" else MLP)(d, mlp.width(d))

    def forward(self, x, cache=None, commit: bool = False, block_lengths=None,
                carry: Carry | None = None):
        """x [B, T, d_model] through the mixer (a step against `cache`, a fold with `commit`,
        with `cache` and `block_lengths` a fold of those blocks at once, or with `block_lengths`
        alone the uncached block-causal forward, from `carry`'s state when given) and the FFN,
        residuals around each."""
        h = self.norm1(x)
        if cache is not None and block_lengths is not None:  # several blocks folded at once
            mixed = self.mixer.fold_blocks(h, block_lengths, cache)
        elif block_lengths is not None:
            mixed = self._mix(lambda: self.mixer.forward_blockwise(h, block_lengths),
                              lambda start: self.mixer.forward_blockwise_from(h, block_lengths, start),
                              carry)
        else:
            mixed = self.mixer.fold(h, cache) if commit else self.mixer(h, cache)
        x = x + mixed
        return x if self.ffn is None else x + self.ffn(self.norm2(x))

    def _mix(self, plain, passed, carry: Carry | None):
        """`plain()`, or with `carry` `passed(start)` from this layer's start state, its end
        state recorded in `carry` (attention layers start empty and record None; a fixed-state
        mixer without the `_from` forms is refused before training starts)."""
        if carry is None or self.mixer.growing:
            if carry is not None:
                carry.end.append(None)
            return plain()
        *out, end = passed(carry.start[len(carry.end)])
        carry.end.append(end)
        return out[0] if len(out) == 1 else tuple(out)

    def two_stream(self, x_clean, x_noised, blocks, last: bool = False, carry: Carry | None = None):
        """Both streams through the layer (`Mixer.forward_two_stream`, from `carry`'s state
        when given); the FFN reads each token alone, so both streams pass it as one batch of
        tokens. In the `last` layer nothing reads the clean stream's output: only the noised
        one goes on (clean returns None)."""
        hc, hn = self.norm1(x_clean), self.norm1(x_noised)
        mc, mn = self._mix(lambda: self.mixer.forward_two_stream(hc, hn, blocks),
                           lambda start: self.mixer.forward_two_stream_from(hc, hn, blocks, start),
                           carry)
        T = 0 if last else x_clean.shape[1]
        x = x_noised + mn if last else torch.cat([x_clean + mc, x_noised + mn], 1)  # (B, T + K·G, d)
        if self.ffn is not None:
            x = x + self.ffn(self.norm2(x))
        return (None if last else x[:, :T]), x[:, T:]


class LM(nn.Module):
    """Block-diffusion (or, with G = 1, autoregressive) language model over one recipe.

    forward(tokens [B, G], cache) -> logits [B, G, vocab] (fp32); the cache is unchanged.
    fold(tokens, cache)           -> the same logits, and the block is written into the cache.
    forward_blockwise(tokens [B, T], block_lengths) -> logits [B, T, vocab], no cache (the
        training path).
    forward_two_stream(clean, noised, blocks) -> logits of every noised block against the clean
        blocks before it, in one forward (the `blocks` objective).
    Both training forms take a `Carry` (state passing).

    With the recipe's `logit_shift` (Dream), position j's logits are the head of position
    j - 1's final hidden state, in every pass: an autoregressive model's position j - 1
    already predicts token j, so a denoiser adapted from one starts from what its head knows.
    A block's first position reads the last token before the block (in the cached passes, the
    one the cache folded last: `ModelCache.last_hidden`); the first position of a sequence,
    which has none, reads its own (with state passing too: a passed state carries no hidden).
    """

    def __init__(self, recipe: Recipe, dtype: torch.dtype | None = None,
                 state_dtype: torch.dtype | None = None):
        super().__init__()
        self.recipe = recipe
        self.dtype = dtype or TORCH_DTYPES[recipe.dtype]
        self.state_dtype = state_dtype or TORCH_DTYPES[recipe.state_dtype]
        # Given storage skips nn.Embedding's own init (init_weights sets every weight; on the
        # meta device that init would import torch's decomposition machinery, ~1 s).
        self.embed = nn.Embedding(recipe.vocab_size, recipe.d_model,
                                  _weight=torch.empty(recipe.vocab_size, recipe.d_model))
        self.layers = nn.ModuleList(
            Layer(recipe, kind, self.dtype, self.state_dtype) for kind in recipe.layer_plan
        )
        self.norm_f = RMSNorm(recipe.d_model, recipe.norm_eps, recipe.norm_offset)
        # Tied: the head is the embedding matrix (no lm_head parameter, none in checkpoints).
        self.lm_head = (None if recipe.tie_embeddings
                        else nn.Linear(recipe.d_model, recipe.vocab_size, bias=False))

    def head(self, h):
        """Logits (fp32) of final hidden states h [..., d_model]."""
        if self.lm_head is None:
            return F.linear(h, self.embed.weight).float()
        return self.lm_head(h).float()

    def set_train_backend(self, name: str) -> None:
        """Run the mixers' training forms on `name` (torch or fla); a mixer without an fla form
        (attention) stays on torch."""
        for layer in self.layers:
            layer.mixer.backend = name if name in layer.mixer.backends else "torch"

    def state_passing_gap(self) -> str | None:
        """Why this model's training forms cannot start from a passed state (`Carry`), or None:
        every layer either attention reading its sequence alone or a mixer with `_from` forms
        on its training backend."""
        for i, layer in enumerate(self.layers):
            m = layer.mixer
            if m.growing or (m.carries and m.backend == "torch"):
                continue
            what = "windowed attention" if m.kind == "attention" else f"{m.kind} on {m.backend}"
            return f"layer {i} ({what}) cannot start from a passed state"
        return None

    # -- caches -------------------------------------------------------------------------------
    def empty_cache(self, batch: int, capacity: int, device=None, block_size: int | None = None):
        device = device or self.embed.weight.device
        layers = [layer.mixer.empty_cache(batch, capacity, device) for layer in self.layers]
        return ModelCache(layers, block_size or self.recipe.block_size, batch)

    def synthetic_cache(self, batch: int, S: int, device=None, seed: int = 0,
                        capacity: int | None = None, block_size: int | None = None):
        """A cache that looks like S finished tokens, with room for `capacity` (default S + G)."""
        device = torch.device(device or self.embed.weight.device)
        G = block_size or self.recipe.block_size
        gen = torch.Generator(device=device).manual_seed(seed)
        cap = S + G if capacity is None else capacity
        layers = [layer.mixer.synthetic_cache(batch, S, device, gen, cap) for layer in self.layers]
        last = None
        if self.recipe.logit_shift and S:
            last = torch.randn(batch, self.recipe.d_model, device=device, generator=gen)
        return ModelCache(layers, G, batch, length=S,
                          last_hidden=None if last is None else last.to(self.dtype))

    def cache_bytes(self, batch: int, S: int) -> CacheBytes:
        """Exact bytes of a cache holding S tokens: growing (KV) and fixed (state) parts."""
        kv = state = 0
        for layer in self.layers:
            n = layer.mixer.cache_bytes(batch, S)
            if layer.mixer.growing:
                kv += n
            else:
                state += n
        return CacheBytes(kv, state)

    # -- passes -------------------------------------------------------------------------------
    def _run(self, tokens, cache: ModelCache, commit: bool):
        G = tokens.shape[1]
        if G > cache.block_size:
            raise ValueError(f"block of {G} tokens exceeds the cache's block size {cache.block_size}")
        if tokens.shape[0] != cache.batch:
            raise ValueError(f"batch {tokens.shape[0]} does not match the cache's batch {cache.batch}")
        x = self.embed(tokens).to(self.dtype)
        for layer, lc in zip(self.layers, cache.layers):
            x = layer(x, lc, commit=commit)
        h = self.norm_f(x)
        if self.recipe.logit_shift:
            first = h[:, 0] if cache.length == 0 else cache.last_hidden
            assert first is not None, "a shifted model's cache keeps the last folded hidden"
            if commit:
                cache.last_hidden = h[:, -1]
            h = shifted(h, first)
        if commit:
            cache.length += G
        return self.head(h)

    def forward(self, tokens, cache: ModelCache):
        return self._run(tokens, cache, commit=False)

    def fold(self, tokens, cache: ModelCache):
        return self._run(tokens, cache, commit=True)

    def fold_blocks(self, tokens, cache: ModelCache, block_lengths: list[int] | None = None):
        """Fold several blocks at once (a prompt's prefill, one pass): `tokens` [B, T] cut into
        `block_lengths` (default: blocks of the cache's G, the last one shorter), each at most
        G; the cache as folding each block in turn leaves it. Returns the last token's logits
        [B, vocab] (fp32): in AR mode they predict the next token."""
        T = tokens.shape[1]
        G = cache.block_size
        if block_lengths is None:
            block_lengths = blocks_of(T, G)
        if sum(block_lengths) != T or max(block_lengths) > G:
            raise ValueError(f"blocks {block_lengths} must cover {T} tokens, each at most G {G}")
        if tokens.shape[0] != cache.batch:
            raise ValueError(f"batch {tokens.shape[0]} does not match the cache's batch {cache.batch}")
        x = self.embed(tokens).to(self.dtype)
        for layer, lc in zip(self.layers, cache.layers):
            x = layer(x, lc, commit=True, block_lengths=block_lengths)
        h = self.norm_f(x[:, -2:])  # the last token, and with the shift the one before it
        if self.recipe.logit_shift:  # as the fold of the last block would: see _run
            before = h[:, -2] if T > 1 else h[:, -1] if cache.length == 0 else cache.last_hidden
            cache.last_hidden = h[:, -1]
            h = before[:, None]
        cache.length += T
        return self.head(h[:, -1])

    def forward_two_stream(self, clean, noised, blocks, select=None, carry: Carry | None = None):
        """Logits of noised blocks, each read against the clean blocks before it, in one
        forward (the `blocks` training objective).

        clean  [B, T] tokens, blocks of G (the recipe's block size, or the smaller one an
               annealed run trains at: G is noised's length over K)
        noised [B, K·G] tokens: K blocks per sequence, the k-th standing at block blocks[b, k]
        blocks [B, K] long
        Returns logits [B, K·G, vocab] of the noised blocks (or, with `select` [B, K·G] bool,
        [n, vocab] of the selected positions): those of `forward(noised block, cache)` after a
        fold of the clean blocks before it. With `carry`, the fixed-state layers start from
        its state and leave the clean stream's end in it (state passing)."""
        B, K = blocks.shape
        G = noised.shape[1] // K  # the recipe's, or the smaller one an annealed run trains at
        assert noised.shape[1] == K * G and clean.shape[1] % G == 0
        shift = self.recipe.logit_shift
        xc, xn = self.embed(clean).to(self.dtype), self.embed(noised).to(self.dtype)
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1 and not shift  # a shift reads the clean stream
            xc, xn = layer.two_stream(xc, xn, blocks, last=last, carry=carry)
        h = self.norm_f(xn)
        if shift:  # each block's first position reads the clean token before the block
            before = self.norm_f(xc).gather(1, (blocks * G - 1).clamp(min=0)[..., None]
                                            .expand(-1, -1, h.shape[-1]))  # (B, K, d)
            h = h.reshape(B * K, G, -1)
            first = torch.where((blocks == 0).view(-1, 1), h[:, 0], before.reshape(B * K, -1))
            h = shifted(h, first).reshape(B, K * G, -1)
        return self.head(h if select is None else h[select])

    def forward_blockwise(self, tokens, block_lengths: list[int] | None = None, select=None,
                          carry: Carry | None = None):
        """With `select` (a [B, T] bool mask) only the selected positions' logits, [n, vocab]:
        the training objectives score a few positions and skip the head on the rest. With
        `carry`, the fixed-state layers start from its state and leave their end in it."""
        T = tokens.shape[1]
        if block_lengths is None:
            G = self.recipe.block_size
            block_lengths = blocks_of(T, G)
        assert sum(block_lengths) == T, "block lengths must cover the sequence"
        x = self.embed(tokens).to(self.dtype)
        for layer in self.layers:
            x = layer(x, block_lengths=block_lengths, carry=carry)
        h = self.norm_f(x)
        if self.recipe.logit_shift:
            h = shifted(h, h[:, 0])
        return self.head(h if select is None else h[select])


def read_as(model: LM, G: int, shift: bool) -> LM:
    """`model`'s weights read at block size `G` with the logit shift on or off (as a causal LM:
    G 1, no shift; a genppl cell's G): a second LM object whose recipe says so, sharing every
    module, parameter and buffer with `model`, which is left as it is (only the LM itself reads
    the two fields: its mixers are built for any G)."""
    if (G, shift) == (model.recipe.block_size, model.recipe.logit_shift):
        return model
    view = copy.copy(model)  # its own attribute dict; the same submodules and tensors
    view.recipe = model.recipe.model_copy(update={"block_size": G, "logit_shift": shift})
    return view


def shifted(h, first):
    """The logit shift: h [B, T, d] with position j > 0 holding h[:, j - 1] and position 0
    `first` [B, d] (the hidden state before the block, or position 0's own)."""
    return torch.cat([first[:, None], h[:, :-1]], 1)


def init_weights(model: LM, seed: int = 0) -> LM:
    """Seeded initial weights, drawn in place on the model's device, parameter by parameter in
    the model's order from one generator: a mixer's own through `Mixer.init_parameter` (Mamba-2
    style A, dt and conv, for instance), a zero-centred norm's weight 0 (the scale 1), every
    other one by `init_parameter`. Reproducible for a given seed and device type."""
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            parts = name.split(".")  # layers.<i>.mixer.<...>.<leaf> for a mixer's own
            owner = model.get_submodule(".".join(parts[:-1]))
            if isinstance(owner, RMSNorm) and owner.offset:
                p.zero_()  # draws nothing from the generator, as the fill of a plain norm
                continue
            init = init_parameter
            if parts[0] == "layers" and parts[2] == "mixer":
                init = model.layers[int(parts[1])].mixer.init_parameter
            init(parts[-1], p, gen)
    return model


def build_model(recipe: Recipe, device="cpu", seed: int = 0, dtype: torch.dtype | None = None,
                state_dtype: torch.dtype | None = None) -> LM:
    """Build on `device` with seeded weights; on "meta" only shapes are made (no memory)."""
    with torch.device("meta"):
        model = LM(recipe, dtype, state_dtype)
    model = model.to(dtype=model.dtype)
    if torch.device(device).type == "meta":
        return model
    return init_weights(model.to_empty(device=device), seed)


def count_params(model: LM) -> dict[str, int]:
    """Parameters in total and per component kind (mixer kinds, ffn, embeddings, norms)."""
    counts: dict[str, int] = {}
    for name, p in model.named_parameters():
        if ".mixer." in name:
            key = model.layers[int(name.split(".")[1])].mixer.kind
        elif ".ffn." in name:
            key = "moe" if model.recipe.moe is not None else "mlp"
        elif name.startswith(("embed", "lm_head")):
            key = "embedding"
        else:
            key = "norm"
        counts[key] = counts.get(key, 0) + p.numel()
    counts["total"] = sum(v for k, v in counts.items())
    return counts


# Above this many weight bytes the model is built on the meta device (shapes only).
META_ABOVE_BYTES = 256 * 2**20


def build_report(recipe, S: int, B: int, device: str = "auto") -> dict:
    """The facts `fsc build` prints, from a model built on CPU or (large ones) on meta."""
    meta = build_model(recipe, device="meta")
    params = count_params(meta)
    weight_bytes = sum(p.numel() * p.element_size() for p in meta.parameters())
    if device == "auto":
        device = "meta" if weight_bytes > META_ABOVE_BYTES else "cpu"
    model = meta if device == "meta" else build_model(recipe, device=device)
    built_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert built_bytes == weight_bytes
    cache = model.cache_bytes(B, S)
    return {
        "name": recipe.name,
        "recipe_hash": recipe.recipe_hash,
        "n_layers": recipe.n_layers,
        "layer_plan": recipe.layer_plan,
        "layer_map": recipe.layer_map,
        "block_size": recipe.block_size,
        "dtype": recipe.dtype,
        "state_dtype": recipe.state_dtype,
        "position_encoding": recipe.position_encoding,
        "n_params": params["total"],
        "params_by_kind": {k: v for k, v in params.items() if k != "total"},
        "weight_bytes": weight_bytes,
        "built_on": str(torch.device(device)),
        "cache": {"S": S, "B": B, **cache.as_dict()},
    }
