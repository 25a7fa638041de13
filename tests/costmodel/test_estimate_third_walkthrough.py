"""`fsc estimate` read against the recipe's own dimensions: one value of each of S, B, G and K
(a second one was dropped unsaid), an unknown device told which figures it still needs, the
"runs out already" note naming what an attention-only recipe holds, and the 3B hybrid's
figures recomputed by hand."""

from __future__ import annotations

import io
import json

import pytest


def _said(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


@pytest.fixture
def wide(monkeypatch):
    from fsc.cli import common

    monkeypatch.setattr(common.out, "width", 200)  # every note whole on its line


@pytest.mark.parametrize(("option", "first", "second"), [
    ("--S", "1k", "4k"), ("--B", "1", "2"), ("--G", "2", "4"), ("--steps", "1", "2")])
def test_a_point_option_given_twice_is_refused(cli, option, first, second):
    """`--S 1k --S 4k` estimated S 4096 alone, exit 0, where `fsc profile` measures both."""
    r = cli("estimate", "tiny_attn", option, first, option, second, "--json")
    assert r.code == 2 and r.out == "", r.out
    said = _said(r.err)
    assert said.count("error:") == 1 and r.err.count("\n") == 1
    assert (f"'{option}': given 2 times ('{first}', '{second}'); fsc estimate predicts one "
            "point; `fsc profile --dry-run` lists several") in said


def test_one_value_of_each_is_the_point_estimated(cli):
    doc = json.loads(cli("estimate", "tiny_attn", "--S", "4k", "--B", "3", "--G", "2",
                         "--steps", "1", "--json").out)
    assert (doc["S"], doc["B"], doc["G"], doc["K"]) == (4096, 3, 2, 1)
    doc = json.loads(cli("estimate", "tiny_attn", "--json").out)  # the defaults
    assert (doc["S"], doc["B"], doc["G"], doc["K"]) == (8192, 1, 4, 4)


def test_help_shows_one_value_not_a_list(cli):
    said = _said(cli("estimate", "--help").out)
    for option in ("--S", "--B", "--G", "--steps"):  # one value, named N
        assert f"{option} N " in said
    assert "list[" not in said and "default 8192" in said


@pytest.mark.parametrize(("figures", "needs"), [
    ((), "give --bandwidth, --tflops and --memory"),
    (("--memory", "80"), "give --bandwidth and --tflops too"),
    (("--bandwidth", "1", "--tflops", "2"), "give --memory too")])
def test_an_unknown_device_is_told_what_it_still_needs(cli, figures, needs):
    """With two of the three figures given, the error asked for all three."""
    r = cli("estimate", "tiny_attn", "--gpu", "foo", *figures)
    assert r.code == 2
    assert ("unknown GPU 'foo'; known: h100, h200, a100; for another device "
            f"{needs}") in _said(r.err)


def test_a_pcie_part_is_said_to_differ_from_the_table(cli):
    r = cli("estimate", "tiny_attn", "--gpu", "NVIDIA H100 PCIe")
    assert r.code == 2
    assert ("unknown GPU 'NVIDIA H100 PCIe' (a PCIe, NVL or 40 GB part has other figures than "
            "the table's)") in _said(r.err)


def test_what_does_not_fit_at_S_0_is_what_the_recipe_holds(cli, wide):
    """attn_3b in 4.74 GB: 4.73 GB of weights, 32 tokens of KV room and the activations; it
    has no state, which the note named."""
    said = _said(cli("estimate", "attn_3b", "--memory", "4.74").out)
    assert ("memory runs out already weights, the cache of one block and activations do not "
            "fit at B = 1, even at S 0") in said


def test_hybrid_3b_by_hand(cli):
    """hybrid_3b (d 2560, 28 layers: 5 attention with 20 heads of 128, 23 Mamba-2 with
    d_inner 5120, N 128, head_dim 64, d_conv 4; MLP 4·d; V 32000; bf16, fp32 states) at
    S 4096, B 2, G = K = 32 on an H100."""
    d = json.loads(cli("estimate", "hybrid_3b", "--S", "4096", "--B", "2", "--json").out)
    dm, V, L, H, D, di, N, nh, C, h = 2560, 32000, 28, 20, 128, 5120, 128, 80, 5376, 10240
    S, B, G, T = 4096, 2, 32, 64
    attn = 4 * dm * H * D
    mamba = dm * (di + C + nh) + C * 4 + C + 3 * nh + di * dm
    mlp, norm = 2 * dm * h, (2 * L + 1) * dm
    params = 2 * V * dm + 5 * attn + 23 * mamba + L * mlp + norm
    assert d["param_count"] == params == 2_687_868_560
    assert d["weight_bytes"] == 2 * params
    assert d["kv_bytes"] == 5 * 2 * B * S * H * D * 2 == 400 * 2**20
    assert d["state_bytes"] == 23 * B * (C * 3 + di * N) * 4
    parts = d["step_bytes_by_part"]
    # every weight once, but only the T rows of the embedding the block's tokens look up
    assert parts["weights"] == 2 * (params - V * dm + T * dm)
    io = 5 * 4 * (dm + H * D) + 23 * (dm + (di + C + nh) + di + dm) + L * 2 * (dm + h)
    assert parts["activations"] == T * 2 * (dm + io + dm + V)
    assert d["step_bytes"] == sum(parts.values())
    flops = d["step_flops_by_part"]
    assert flops["matmul"] == 2 * T * (5 * attn + 23 * (dm * (di + C + nh) + di * dm)
                                       + dm * V + L * mlp)
    assert flops["attention"] == 5 * 4 * T * (S + G) * H * D
    assert flops["scan"] == 23 * T * (10 * di * N + 2 * C * 4)
    assert d["floor_ms"] == pytest.approx(d["step_bytes"] / 3.35e12 * 1e3)
    fold_ms = (d["step_bytes"] + d["state_bytes"] + 5 * 2 * B * G * H * D * 2) / 3.35e9
    assert d["fold_floor_ms"] == pytest.approx(fold_ms)
    assert d["tokens_per_s"] == pytest.approx(B * G / (32 * d["floor_ms"] + fold_ms) * 1e3)


def test_a_tiny_floor_and_roofline_are_figures_not_zero():
    """tiny_mamba at S 16, B 1 on an H100: a floor of 0.00014 ms against a 0.1 ms step, 0.14 %
    of the roofline; the table printed 0.000 and 0%."""
    from rich.console import Console

    from fsc.cli.profile_render import render_rows
    from fsc.sweep_results import PointResult

    row = PointResult("tiny_mamba", "0123456789abcdef", ["mamba"], 16, 1, 4, 4, "fp32", "auto",
                      "cuda:0", step_ms=0.1, step_ms_p10=0.1, step_ms_p90=0.1, fold_ms=0.1,
                      tokens_per_s=8000.0, peak_bytes=2**19, cache_bytes=2**13,
                      achieved_gbps=4.7, floor_ms=1.4e-4, roofline_fraction=1.4e-3)
    console = Console(width=200, file=io.StringIO(), color_system=None)
    render_rows([row], "r", "store", "fsc query ...", console, Console(file=io.StringIO()))
    line = next(ln for ln in console.file.getvalue().splitlines() if "tiny_mamba" in ln)
    assert " 0.00014 " in line and " 0.14% " in line
    assert " 0.000 " not in line and " 0% " not in line


@pytest.mark.slow
def test_profile_prints_a_tiny_floor_and_roofline_as_figures_not_zero(cli, tmp_path):
    """At 1000 TB/s tiny_mamba's floor is 4.7e-07 ms, a 1e-6 % of its step: the table
    printed 0.000 and 0%, as if no floor were known or none reached."""
    r = cli("profile", "-r", "tiny_mamba", "--S", "16", "--B", "1", "--repeats", "1",
            "--warmup", "0", "--bandwidth", "1000", "--store", tmp_path / "st", "--wide")
    assert r.code == 0, r.err
    row = next(line for line in r.out.splitlines() if "tiny_mamba" in line and "│" in line)
    floor, roofline = [c.strip() for c in row.split("│") if c.strip()][-2:]
    assert floor == "4.7e-07" and roofline.endswith("%") and float(roofline[:-1]) > 0
    assert " 0.000 " not in row and " 0% " not in row


def test_G_and_steps_are_sizes_as_fsc_profile_reads_them(cli):
    """`fsc profile --G 1k` is G 1024; `fsc estimate --G 1k` was refused as no whole number,
    while its --B took 1k."""
    import json

    doc = json.loads(cli("estimate", "tiny_attn", "--G", "1k", "--steps", "1k", "--json").out)
    assert (doc["G"], doc["K"]) == (1024, 1024)
