"""The cost model's rule of which attention layers read a mask (`masked_layers`) is the
model's: counted against the masks scaled_dot_product_attention is handed, in the uncached
pass, a fold and the blocks bound's two streams; training's memory counts masks by it."""

import pytest
import torch

from fsc.costmodel.shapes import masked_layers
from fsc.costmodel.training import training_memory
from fsc.recipe import load_recipe


def _recipe(name: str, window: int | None):
    recipe = load_recipe(name)
    return recipe.changed((("attention.window", window),)) if window else recipe


def _masks_read(monkeypatch, run) -> int:
    """How many attention calls of `run()` were handed a mask."""
    import fsc.model.attention as attention

    seen, sdpa = [], torch.nn.functional.scaled_dot_product_attention

    def counting(*args, attn_mask=None, **kw):
        seen.append(attn_mask is not None)
        return sdpa(*args, attn_mask=attn_mask, **kw)

    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", counting)
    with torch.no_grad():
        run()
    return sum(seen)


@pytest.mark.parametrize("name", ["tiny_attn", "tiny_hybrid"])
@pytest.mark.parametrize("window", [None, 8])
@pytest.mark.parametrize("G", [1, 4])
def test_the_rule_is_what_the_model_reads(monkeypatch, name, window, G):
    from fsc.model.lm import build_model

    recipe = _recipe(name, window)
    model = build_model(recipe, seed=0)
    tokens = torch.randint(0, recipe.vocab_size - 1, (2, 16))
    blocks = [G] * (16 // G)
    assert _masks_read(monkeypatch, lambda: model.forward_blockwise(tokens, blocks)) == \
        masked_layers(recipe, G)
    cache = model.empty_cache(2, 16 + G, block_size=G)
    folded = _masks_read(monkeypatch, lambda: model.fold_blocks(tokens, cache, blocks))
    assert (folded > 0) == (masked_layers(recipe, G, "fold") > 0)
    if G > 1:  # the blocks bound's pass: both streams masked
        from fsc.objective import Batch, block_losses, draw_blocks

        d = draw_blocks(Batch(tokens, torch.ones_like(tokens, dtype=torch.bool)), G,
                        recipe.vocab_size - 1, torch.Generator().manual_seed(0))
        assert _masks_read(monkeypatch, lambda: block_losses(model, d)) == \
            2 * masked_layers(recipe, G, "two-stream")


def test_training_counts_the_masks_its_objective_reads():
    attn, windowed = _recipe("tiny_attn", None), _recipe("tiny_attn", 8)
    n, T, B, G = attn.layer_counts["attention"], 64, 2, attn.block_size
    assert training_memory(attn, T, B, "frontier").mask_bytes == n * T * T
    assert training_memory(attn, T, B, "ar").mask_bytes == 0  # the causal kernel reads none
    assert training_memory(windowed, T, B, "ar").mask_bytes == n * T * T
    assert training_memory(attn, T, B, "blocks").mask_bytes == n * (T * T + B * G * (T + G))
    assert training_memory(load_recipe("tiny_mamba"), T, B, "blocks").mask_bytes == 0
    with pytest.raises(ValueError, match="not one of"):
        masked_layers(attn, G, "backward")
