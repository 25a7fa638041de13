"""Small refusals found reading recipes and paths: llama3's RoPE bands under a linear scaling
(ignored, and left out of the hash), a file name too long for the OS (a 5,000-character line),
and an import whose store cannot be written (refused before the checkpoint is written)."""

import pytest

from fsc.errors import RecipeError
from fsc.recipe import parse_recipe

ATTN = {"name": "t", "d_model": 32, "n_layers": 1, "vocab_size": 64,
        "layers": {"default": "attention"}}


@pytest.mark.parametrize("band", ["low_freq_factor", "high_freq_factor", "original_context"])
def test_llama3s_bands_under_a_linear_scaling_are_refused(band):
    scaling = {"kind": "linear", "factor": 2, band: 4096 if band == "original_context" else 2.0}
    with pytest.raises(RecipeError, match=rf"rope_scaling.{band}: is llama3's"):
        parse_recipe({**ATTN, "attention": {"n_heads": 2, "rope_scaling": scaling}})
    parse_recipe({**ATTN, "attention": {"n_heads": 2, "rope_scaling": {**scaling,
                                                                        "kind": "llama3"}}})


def test_a_name_too_long_for_the_os_is_one_short_line(fsc_main):
    res = fsc_main("build", "x" * 5000, check=2)
    assert "File name too long" in res.stderr and len(res.stderr) < 300


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_an_import_whose_store_cannot_be_written_writes_nothing(fsc_main, tmp_path):
    from tests.imports.published import save_published

    folder = save_published("llama", tmp_path / "tl", seed=1)
    (tmp_path / "afile").write_text("x")
    res = fsc_main("import", folder, "--out", tmp_path / "ck", "--store", tmp_path / "afile",
                   check=2)
    assert "afile" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "ck").exists()
