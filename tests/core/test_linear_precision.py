"""Linear attention's running sums are not decayed: they are kept in fp32 whatever state_dtype."""

import pytest
import torch

from fsc.model.lm import build_model
from fsc.recipe import load_recipe


@torch.no_grad()
def test_bf16_linear_attention_does_not_drift_over_1024_tokens():
    """bf16 weights and activations, state_dtype bf16 (as linear_24_8 ships), one token a block:
    the last output stays within bf16 rounding of the fp32 forward over the same weights. With
    16-bit sums it was 100% off (z stalls at about 256 times its terms: half its value here)."""
    recipe = load_recipe("tiny_linear").with_dtype("bf16")
    low = build_model(recipe, seed=0, state_dtype=torch.bfloat16).eval()
    ref = build_model(recipe.with_dtype("fp32"), seed=0, state_dtype=torch.float32).eval()
    ref.load_state_dict(low.state_dict())
    mixer, ref_mixer = low.layers[0].mixer, ref.layers[0].mixer
    T = 1024
    x = torch.randn(1, T, recipe.d_model, generator=torch.Generator().manual_seed(0)).bfloat16()
    cache = mixer.empty_cache(1, T, "cpu")
    for t in range(T):
        out = mixer.fold(x[:, t : t + 1], cache)
    want = ref_mixer.forward_blockwise(x.float(), [T])[:, -1]  # the last token sees all T
    err = ((out[:, -1].float() - want).abs().max() / want.abs().max()).item()
    assert err <= 2e-2, f"last output {err:.3g} relative off"
    assert {t.dtype for t in cache.tensors.values()} == {torch.float32}


def test_verify_in_bf16_reports_drift_within_tolerance(capsys):
    from fsc.cli.main import main

    assert main(["verify", "tiny_hybrid", "--dtype", "bf16", "--length", "256", "--json"]) == 0
    import json

    rep = json.loads(capsys.readouterr().out)
    assert rep["dtype"] == "bf16" and rep["tokens"] == 256 and rep["exact"] is True
    assert set(rep["drift"]) == {"model", "mamba", "attention"}
    assert all(0 < c["last_rel_err"] <= c["tol"] for c in rep["checks"])  # bf16 is not exact


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_verify_in_bf16_catches_a_sum_kept_in_bf16(monkeypatch, capsys):
    """The check can fail: linear attention's sums in 16 bits drift past the tolerance."""
    from fsc.cli.main import main
    from fsc.model.linear import LinearAttention

    shapes = LinearAttention.cache_shapes

    def bf16_sums(self, batch, capacity):
        return {k: (shape, torch.bfloat16) for k, (shape, _) in shapes(self, batch, capacity).items()}

    monkeypatch.setattr(LinearAttention, "cache_shapes", bf16_sums)
    assert main(["verify", "tiny_linear", "--dtype", "bf16", "--G", "1", "--length", "1024"]) == 1
    assert "drifts past tolerance" in capsys.readouterr().out


def test_verify_options_are_checked_before_torch_runs(capsys):
    from fsc.cli.main import main

    assert main(["verify", "tiny_attn", "--blocks", "3", "--length", "12"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["verify", "tiny_attn", "--G", "1"]) == 2  # fp32 exactness needs G > 1
    assert main(["verify", "tiny_attn", "--G", "1", "--dtype", "bf16", "--length", "8"]) == 0


def test_an_autoregressive_recipe_is_verified_at_its_own_G(cli, tmp_path):
    """A G 1 recipe (or checkpoint) is checked one token a block, as it decodes, not at G 4."""
    import json

    path = tmp_path / "ar.yaml"
    path.write_text(load_recipe("tiny_attn").as_autoregressive().to_yaml())
    res = cli("verify", path, "--blocks", "3", "--json")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["G"] == 1 and doc["exact"] is True
