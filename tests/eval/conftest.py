"""What the eval tests share."""

import pytest


@pytest.fixture
def ar_recipe(tmp_path):
    """A seeded G = 1 recipe: an autoregressive model (a scorer, a harness model)."""
    from fsc.recipe import load_recipe

    text = load_recipe("tiny_attn").to_yaml().replace("name: tiny_attn", "name: tiny_ar")
    path = tmp_path / "tiny_ar.yaml"
    path.write_text(text.replace("block_size: 4", "block_size: 1"))
    return path
