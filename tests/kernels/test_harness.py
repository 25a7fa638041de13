"""The checks themselves can fail: poisoned buffers are NaN, and a NaN fails the comparison."""

import importlib.util
import subprocess
import sys

import pytest
import torch
from fsc.kernels import _common
from kernel_checks import assert_close


def test_launcher_buffers_start_poisoned():
    assert _common.POISON
    assert torch.isnan(_common.empty((3, 5), torch.bfloat16, "cpu")).all()


def test_one_unwritten_element_fails_the_comparison():
    ref = torch.randn(4, 8)
    out = ref.clone()
    out[2, 3] = float("nan")
    with pytest.raises(AssertionError, match="non-finite"):
        assert_close(out, ref, torch.float32)
    out[2, 3] = ref[2, 3] + 1e-3 * ref.abs().max()
    with pytest.raises(AssertionError, match="relative error"):
        assert_close(out, ref, torch.float32)


def test_kernels_is_not_a_top_level_package(tmp_path):
    """fsc's kernels live at fsc.kernels; `kernels` stays free for the Hugging Face package."""
    code = ("import importlib.util as u; "
            "print(u.find_spec('kernels') is None, u.find_spec('fsc.kernels') is not None)")
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "True"]
    assert importlib.util.find_spec("fsc.kernels.attention.triton") is not None
