"""cache_bytes is exact: it equals the bytes really allocated, for every mixer."""

import pytest

from fsc.model.lm import build_model
from fsc.recipe import load_recipe, shipped_recipes


@pytest.mark.parametrize("name", sorted(shipped_recipes()))
def test_cache_bytes_equal_allocation(name):
    recipe = load_recipe(name)
    if recipe.d_model > 128:
        recipe = recipe.with_width(64, vocab_size=300)
    m = build_model(recipe, device="meta")
    for B, S in [(1, 0), (2, 7), (3, 33)]:
        cache = m.empty_cache(B, S, "cpu")
        assert m.cache_bytes(B, S) == cache.nbytes()
        for layer, lc in zip(m.layers, cache.layers):
            assert layer.mixer.cache_bytes(B, S) == lc.nbytes()


def test_kv_grows_state_does_not():
    m = build_model(load_recipe("tiny_hybrid"), device="meta")
    a, b = m.cache_bytes(2, 100), m.cache_bytes(2, 200)
    assert b.kv_bytes == 2 * a.kv_bytes > 0
    assert b.state_bytes == a.state_bytes > 0


def test_synthetic_cache_is_random_and_sized():
    m = build_model(load_recipe("tiny_hybrid"))
    c = m.synthetic_cache(2, 16, seed=0)
    assert c.length == 16 and c.block_size == 4
    for lc in c.layers:
        for name, t in lc.tensors.items():
            filled = t[:, :16] if lc.growing else t
            assert (filled != 0).float().mean() > 0.99, (lc.kind, name)
    assert c.nbytes() == m.cache_bytes(2, 16 + 4)


def test_large_recipe_builds_on_meta_quickly():
    m = build_model(load_recipe("hybrid_24_8"), device="meta")
    assert all(p.device.type == "meta" for p in m.parameters())
    assert sum(p.numel() for p in m.parameters()) > 7e9
    assert m.cache_bytes(1, 8192).kv_bytes == 8 * 128 * 2**20  # 8 layers × 128 MiB
