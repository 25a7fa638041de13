"""`python -m tools.gpucheck --dry-run` runs the whole GPU check at tiny shapes on the CPU."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fsc.kernels import _common, op_folders

from tools.gpucheck import FOLDERS as MODULES

ROOT = Path(__file__).parents[2]
OPS = set(op_folders())  # every kernel folder


@pytest.mark.slow  # make test-slow (CI) and make test-all
def test_gpucheck_dry_run_end_to_end(tmp_path, monkeypatch):
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "tools.gpucheck", "--dry-run"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((tmp_path / "gpucheck.json").read_text())
    rows = result["rows"]
    assert {r["op"] for r in rows} == OPS
    assert all(r["status"] == "ok" for r in rows), [r for r in rows if r["status"] != "ok"]
    for r in rows:
        assert r["triton_us"] > 0 and r["torch_us"] > 0 and r["bytes"] > 0
        if r["mode"] == "fold" or r["op"] == "block_attention":
            assert r["rel_err"] < 2e-2, r  # bf16 outputs against the fp32 reference
        if r["mode"] == "fold":
            assert r["state_rel_err"] < 1e-4, r  # fp32 states
    assert any(r["op"] == "block_attention" and r["S"] == 0 for r in rows)
    assert all(r["sdpa_us"] > 0 for r in rows if r["op"] == "block_attention")
    tuning = result["tuning"]
    assert [(r["op"], r["B"], r["S"]) for r in tuning] == [
        ("block_attention", 1, 40), ("block_attention", 2, 40),
        *((op, 2, None) for op in op_folders() if op != "block_attention")]
    for r in tuning:
        assert r["status"] == "ok", r
        changes = [t["change"] for t in r["trials"]]
        assert len(changes) == 3 and changes[0] == {} and all(changes[1:]), changes
        assert all(t["us"] > 0 for t in r["trials"]), r
        assert r["best_us"] == min(t["us"] for t in r["trials"]) and r["default_us"] > 0
    assert [t["change"] for t in tuning[0]["trials"]][-1] == {"splits": 1}
    for r in tuning:  # the FSC_KERNEL_TUNING it prints gives exactly the fastest choice
        module = importlib.import_module(f"fsc.kernels.{MODULES[r['op']]}.triton")
        monkeypatch.setenv(_common.TUNING_ENV, r["best_env"])
        assert _common.from_env(MODULES[r["op"]], module.Tuning()) == module.Tuning(**r["best"])
    assert result["profile"]["status"].startswith("skipped")
    assert "gpucheck" in res.stdout and "fastest tried" in res.stdout  # the tables


def test_the_3b_shapes_come_from_the_recipes():
    """d_model 2560: 20 heads of 128 (attention, linear, GLA, Gated DeltaNet); Mamba d_inner
    5120 = 80 heads of 64, N 128, conv width 4 over x, B and C (5120 + 2·128); G 32."""
    from tools.gpucheck import shapes_3b

    assert shapes_3b() == {"G": 32, "heads": 20, "kv_heads": 20, "head_dim": 128,
                           "m_heads": 80, "m_head_dim": 64, "d_state": 128, "d_conv": 4,
                           "conv_dim": 5376}
