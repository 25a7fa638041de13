"""Every launch choice `tools.gpucheck` may try gives the same results: the kernels are exact
under other tiles and warps too (here with several tiles along the split axis)."""

import importlib

import pytest
import torch
from fsc.kernels import _common
from fsc.kernels.points import attention_points, state_points

from fsc.errors import TuningError

# Dimensions of 32 and 48 so that 16-wide tiles make several programs along each split axis;
# G 20: two sub-chunks in GLA's chunk form.
SHAPES = {"G": 20, "heads": 2, "kv_heads": 1, "head_dim": 32, "m_heads": 2, "m_head_dim": 32,
          "d_state": 32, "d_conv": 4, "conv_dim": 48}
CHOICES = [
    ("attention", "block_attention", {"splits": 1}),
    ("attention", "block_attention", {"splits": 5, "num_warps": 8}),
    ("attention", "block_attention", {"programs_per_sm": 1}),
    ("conv", "causal_conv_block", {"block_c": 16, "num_warps": 8}),
    ("mamba", "mamba_block_scan", {"block_p": 16, "block_n": 16}),
    ("mamba", "mamba_block_scan", {"block_p": 64, "block_n": 64, "num_warps": 8}),
    ("linear", "linear_block", {"block_v": 16}),
    ("linear", "linear_block", {"block_v": 64, "num_warps": 8}),
    ("gla", "gla_block", {"form": "scan", "block_v": 16, "num_warps": 8}),
    pytest.param("gla", "gla_block", {"form": "scan", "block_v": 8, "num_warps": 1},
                 marks=pytest.mark.slow),  # the scan form's other block_v stays in make test
    ("gla", "gla_block", {"form": "scan", "block_v": 64, "num_warps": 2}),
    ("gla", "gla_block", {"form": "chunk", "block_v": 16, "num_warps": 8, "num_stages": 1}),
    ("gla", "gla_block", {"form": "chunk", "block_v": 128, "num_warps": 4, "num_stages": 3}),
]


@pytest.mark.parametrize(("module", "op", "change"), CHOICES, ids=lambda c: str(c))
def test_other_launch_choices_match_the_reference(module, op, change):
    mod = importlib.import_module(f"fsc.kernels.{module}.triton")
    gen = torch.Generator().manual_seed(2)
    points = (attention_points(2, 70, SHAPES, torch.float32, "cpu", gen) if module == "attention"
              else state_points(2, SHAPES, torch.float32, "cpu", gen))
    point = next(p for p in points if p.op == op and p.accuracy is not None)
    with _common.tuned(mod, **change) as tuning:
        assert all(getattr(tuning, k) == v for k, v in change.items())
        errors = point.accuracy()
    assert mod.TUNING == mod.Tuning()  # restored
    assert errors["rel_err"] < 1e-5, errors
    assert errors.get("state_rel_err", 0.0) < 1e-5, errors


def test_unknown_choice_is_refused_and_nothing_changes():
    mod = importlib.import_module("fsc.kernels.gla.triton")
    with pytest.raises(TuningError, match="gla has no choice 'block_q'"), \
            _common.tuned(mod, block_q=16):
        pass
    with pytest.raises(TuningError, match=r"gla.num_warps=3 is not valid"), \
            _common.tuned(mod, num_warps=3):
        pass
    assert mod.TUNING == mod.Tuning()


def test_environment_sets_the_defaults(monkeypatch):
    """$FSC_KERNEL_TUNING, in the form gpucheck prints, sets a kernel's defaults at import."""
    from fsc.kernels.attention import triton as attn
    from fsc.kernels.gla import triton as gla

    monkeypatch.setenv(_common.TUNING_ENV, " attention.block_n=128, gla.form=scan,"
                                           "gla.block_v=none,attention.splits=3 ")
    assert _common.from_env("attention", attn.Tuning()) == attn.Tuning(block_n=128, splits=3)
    assert _common.from_env("gla", gla.Tuning()) == gla.Tuning(form="scan")
    assert _common.from_env("conv", importlib.import_module(
        "fsc.kernels.conv.triton").Tuning()).block_c == 64  # untouched


@pytest.mark.parametrize(("raw", "message"), [
    ("attention.block_n", "is not kernel.choice=value"),
    ("block_n=64", "is not kernel.choice=value"),
    ("flash.block_n=64", "unknown kernel 'flash'"),
    ("attention.block_q=64", "attention has no choice 'block_q'"),
    ("attention.block_n=48", "attention.block_n=48 is not valid: want a power of two 16..1024"),
    ("attention.num_stages=0", "want 1..8"),
    ("gla.form=sideways", "want auto or chunk or scan"),
    ("mamba.block_p=big", "want an integer"),
])
def test_bad_environment_is_one_clear_error(monkeypatch, raw, message):
    from fsc.kernels.attention import triton as attn
    from fsc.kernels.gla import triton as gla
    from fsc.kernels.mamba import triton as mamba

    monkeypatch.setenv(_common.TUNING_ENV, raw)
    with pytest.raises(TuningError, match=message) as e:
        for name, mod in (("attention", attn), ("gla", gla), ("mamba", mamba)):
            _common.from_env(name, mod.Tuning())
    assert str(e.value).startswith("FSC_KERNEL_TUNING: ") and "\n" not in str(e.value)


def test_gla_narrows_its_tiles_to_fill_the_gpu():
    from fsc.kernels.gla import triton as gla

    assert gla.block_v(1, 20, 128, 132) == 8  # 320 programs rather than 80
    assert gla.block_v(2, 20, 128, 132) == 16
    assert gla.block_v(4, 20, 128, 132) == 32  # 320 programs already
    assert gla.block_v(1, 2, 4, 132) == 4  # never wider than the (power-of-two) value dim
    assert gla.block_v(1, 20, 128, 132, "chunk") == 16  # the chunk form: 64 down to 16
    assert gla.block_v(8, 20, 128, 132, "chunk") == 64
    assert gla.block_v(1, 2, 4, 132, "chunk") == 16  # tl.dot's least
    with _common.tuned(gla, block_v=64):
        assert gla.block_v(1, 20, 128, 132) == 64


@pytest.mark.slow  # real processes, killed or given a new environment; make test-slow
def test_cli_refuses_bad_tuning_and_records_good_tuning(tmp_path):
    """A bad $FSC_KERNEL_TUNING is one line and exit 2; a good one is kept with the run."""
    import json
    import os
    import subprocess
    import sys

    from fsc_run import in_process

    # new processes: the variable is read when a kernel module is first imported
    env = {**os.environ, "TRITON_INTERPRET": "1", "FSC_KERNEL_TUNING": "gla.form=sideways"}
    res = subprocess.run([sys.executable, "-m", "fsc", "verify", "tiny_gla", "--backend", "triton"],
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [
        "error: FSC_KERNEL_TUNING: gla.form='sideways' is not valid: want auto or chunk or scan"]
    env["FSC_KERNEL_TUNING"] = "gla.form=scan"
    store = tmp_path / "store"
    res = subprocess.run([sys.executable, "-m", "fsc", "profile", "-r", "tiny_gla", "--S", "64",
                          "--B", "1", "--backend", "triton", "--store", str(store), "--json"],
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["points"][0]["mixer_backends"] == {"gla": "triton"}
    res = in_process("query", "--store", store, "--format", "json",
                     "select config->>'kernel_tuning' as t from runs")
    assert json.loads(res.stdout) == [{"t": "gla.form=scan"}], res.stdout + res.stderr


@pytest.mark.parametrize(("raw", "line"), [
    ("foo.x=1", "error: FSC_KERNEL_TUNING: unknown kernel 'foo'; kernels: attention, conv, "
                "gated_delta, gla, linear, mamba"),
    ("attention.nope=3", "error: FSC_KERNEL_TUNING: attention has no choice 'nope'; choices: "
                         "block_n, num_warps, num_stages, programs_per_sm, splits"),
])
def test_profile_on_the_torch_backend_refuses_tuning_no_kernel_takes(cli, monkeypatch,
                                                                    tmp_path, raw, line):
    """The torch backend loads no kernel module, which is where the variable is read; the
    run records it, so it is checked first: one line, exit 2, no run stored."""
    monkeypatch.setenv("FSC_KERNEL_TUNING", raw)
    r = cli("profile", "-r", "tiny_attn", "--S", "16", "--B", "1", "--repeats", "1",
            "--warmup", "0", "--backend", "torch", "--store", tmp_path)
    assert r.code == 2 and r.err.strip().splitlines() == [line], r.err
    monkeypatch.delenv("FSC_KERNEL_TUNING")
    runs = cli("query", "select * from runs", "--store", tmp_path)
    assert "no store at" in runs.err or "0 rows" in runs.out, runs
