"""Shared pieces of the model tests: a model whose mixers matter to the logits, and the
uncached block-causal reference that the cached path is walked against, block by block."""

from __future__ import annotations

import math

import torch

from fsc.decode import DecodeConfig, generate
from fsc.model.lm import build_model
from fsc.recipe import Recipe, load_recipe, parse_recipe, shipped_recipes
from fsc.tokenizer import ByteTokenizer

# The tiny shipped recipes: together they hold every mixer kind.
EVERY_MIXER = sorted(n for n in shipped_recipes() if n.startswith("tiny_"))


def mixing_model(recipe: Recipe | str, scale: float = 5.0, seed: int = 3):
    """The model of `recipe` (or of a shipped recipe's name) in eval mode, its mixers' matrices
    × `scale`: larger weights make every mixer matter to the logits."""
    m = build_model(load_recipe(recipe) if isinstance(recipe, str) else recipe, seed=seed).eval()
    if scale != 1.0:
        with torch.no_grad():
            for layer in m.layers:
                for p in layer.mixer.parameters():
                    if p.ndim == 2:
                        p.mul_(scale)
    return m


def with_shift(name: str) -> Recipe:
    """The shipped recipe `name` with the logit shift (`Recipe.logit_shift`), validated."""
    fields = load_recipe(name).hashed_fields()
    return Recipe.model_validate({**fields, "logit_shift": True})


def blockwise(m, G: int, vocab: int, B: int = 2, nb: int = 3):
    """Random tokens (seeded by G) in `nb` blocks of G, their uncached block-causal logits, an
    empty cache for them and each block's slice of the tokens."""
    tokens = torch.randint(0, vocab, (B, G * nb), generator=torch.Generator().manual_seed(G))
    ref = m.forward_blockwise(tokens, [G] * nb)
    cache = m.empty_cache(B, G * nb, block_size=G)
    return tokens, ref, cache, [slice(b * G, (b + 1) * G) for b in range(nb)]


def passkey_batch(n: int, G: int):
    """A batch of the first `n` passkey samples (128 tokens, blocks of G), on the CPU: a task
    whose supervised positions are its answers."""
    from fsc.data.tasks import Passkey
    from fsc.objective import Batch
    from fsc.tokenizer import ByteTokenizer

    task = Passkey(ByteTokenizer(), 128, G, 5)
    return Batch.of([task.sample(i) for i in range(n)], "cpu")


def random_tokens(T: int, B: int = 2, seed: int = 0, vocab: int = 280) -> torch.Tensor:
    """B rows of T seeded random token ids below `vocab`."""
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def walk_blocks(m, tokens: torch.Tensor, G: int, atol: float = 1e-5, unlike=None) -> None:
    """The cached step of every block of G tokens equals the block-causal forward's logits
    there, and the fold that follows gives the step's logits (the cache's contract). With
    `unlike` (the same weights without an option m has), the forward differs from its: the
    option reaches the logits."""
    nb = tokens.shape[1] // G
    ref = m.forward_blockwise(tokens, [G] * nb)
    if unlike is not None:
        assert (ref - unlike.forward_blockwise(tokens, [G] * nb)).abs().max() > 1e-3
    cache = m.empty_cache(tokens.shape[0], G * nb, block_size=G)
    for b in range(nb):
        blk = tokens[:, b * G : (b + 1) * G]
        step = m(blk, cache)
        torch.testing.assert_close(step, ref[:, b * G : (b + 1) * G], rtol=0, atol=atol)
        torch.testing.assert_close(m.fold(blk, cache), step, rtol=0, atol=atol)


def variant(name: str, changes: dict[str, object], G: int | None = None) -> Recipe:
    """The shipped recipe `name` with fields changed ({"section.field" or "field": value},
    a value None leaving the field as it is) and, given G, that block size."""
    data = load_recipe(name).model_dump(mode="json", exclude_none=True)
    for key, value in changes.items():
        *section, leaf = key.split(".")
        if value is not None:
            (data[section[0]] if section else data)[leaf] = value
    if G is not None:
        data["block_size"] = G
    return parse_recipe(data)


def same_weights(a: Recipe, b: Recipe) -> bool:
    """Whether the two recipes' models, built at one seed, hold equal tensors (an option that
    changes how weights are read, never which)."""
    wa, wb = build_model(a, seed=7).state_dict(), build_model(b, seed=7).state_dict()
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@torch.no_grad()
def two_stream_equals_its_loop(m) -> None:
    """The first layer's mixer of `m`: its batched two-stream form equals the reference loop
    (noised blocks at several places, in an order of their own)."""
    mixer = m.layers[0].mixer
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 24, m.recipe.d_model, generator=g)
    xn = torch.randn(2, 12, m.recipe.d_model, generator=g)
    blocks = torch.tensor([[0, 3, 5], [4, 1, 2]])
    for got, want in zip(mixer.forward_two_stream(x, xn, blocks),
                         mixer.forward_two_stream_loop(x, xn, blocks), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def ragged_rows_decode_alone(m) -> None:
    """Prompts of 11, 2 and 9 bytes decoded together give each prompt's tokens alone, by
    diffusion and AR, and sampled with a threshold (rows finishing a block apart, each drawing
    from its own seed; the head scaled up so that ties are rare)."""
    from fsc.decode import DecodeConfig, generate, generate_batch
    from fsc.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    with torch.no_grad():
        m.lm_head.weight.mul_(20)
    prompts = [tok.encode(t) for t in ["Once upon a", "Hi", "To be or "]]
    seeds = [3, 4, 5]
    for cfg in (DecodeConfig(length=8, G=4, steps=2), DecodeConfig(length=8, G=4, steps=2, mode="ar"),
                DecodeConfig(length=12, G=4, steps=4, temperature=1.0, threshold=0.5)):
        together = generate_batch(m, tok, prompts, cfg, seeds=seeds, batch=3)
        assert [r.token_ids for r in together] == [
            generate(m, tok, p, DecodeConfig(**{**cfg.__dict__, "seed": s})).token_ids
            for p, s in zip(prompts, seeds, strict=True)]


def sharp_model(name: str, seed: int = 5):
    """The shipped recipe `name`'s model in eval mode, its logits sharpened (the head × 20) so
    that greedy choices are not near-ties."""
    m = build_model(load_recipe(name), seed=seed).eval()
    with torch.no_grad():
        m.lm_head.weight.mul_(20)
    return m


def decode_tiny(name: str, **kw):
    """`generate` of `sharp_model(name)` after BOS + "Hi there" (byte tokens): 13 tokens, G 4,
    K 2, seed 1 unless `kw` says (any DecodeConfig field)."""
    tok = ByteTokenizer()
    cfg = DecodeConfig(**{"length": 13, "G": 4, "steps": 2, "seed": 1, **kw})
    return generate(sharp_model(name), tok, [tok.bos_id] + tok.encode("Hi there"), cfg)


def peer_attention(mixer, x, block_lengths, factor=None):
    """Block-causal softmax attention with no position encoding, written from the weights;
    with `factor` (T,), each query multiplied by its own."""
    B, T, _ = x.shape
    h, hkv, d = mixer.n_heads, mixer.n_kv_heads, mixer.head_dim
    q = (x @ mixer.wq.weight.T).view(B, T, h, d)
    if factor is not None:
        q = q * factor[:, None, None]
    k = (x @ mixer.wk.weight.T).view(B, T, hkv, d).repeat_interleave(h // hkv, dim=2)
    v = (x @ mixer.wv.weight.T).view(B, T, hkv, d).repeat_interleave(h // hkv, dim=2)
    block = torch.repeat_interleave(torch.arange(len(block_lengths)), torch.tensor(block_lengths))
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
    scores = scores.masked_fill(block[None, :] > block[:, None], float("-inf"))
    o = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v)
    return o.reshape(B, T, h * d) @ mixer.wo.weight.T
