"""Fixtures of the import tests: tiny published models, saved by transformers."""

import pytest


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """published(family) -> folder of a tiny saved model (built once per module)."""
    from published import save_published

    made = {}

    def get(family: str):
        if family not in made:
            made[family] = save_published(family, tmp_path_factory.mktemp(family))
        return made[family]

    return get
