"""The checks themselves can fail: poisoned buffers are NaN, and a NaN fails the comparison."""

import importlib.util
import subprocess
import sys

import pytest
import torch
from fsc.kernels import _common
from kernel_checks import assert_close

from fsc.errors import KernelError


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


def _small_calls():
    from fsc.kernels.attention.triton import block_attention
    from fsc.kernels.conv.triton import causal_conv_block
    from fsc.kernels.gla.triton import gla_block
    from fsc.kernels.linear.triton import linear_block
    from fsc.kernels.mamba.triton import mamba_block_scan

    r = torch.randn
    return {
        "block_attention": lambda: block_attention(r(1, 2, 2, 16), r(1, 4, 2, 16), r(1, 4, 2, 16),
                                                   r(1, 2, 2, 16), r(1, 2, 2, 16), 3, 0.25),
        "causal_conv_block": lambda: causal_conv_block(r(1, 2, 8), r(1, 8, 3), r(8, 4), r(8)),
        "mamba_block_scan": lambda: mamba_block_scan(r(1, 2, 2, 16), r(1, 2, 2), r(2), -r(2).exp(),
                                                     r(1, 2, 8), r(1, 2, 8), r(2), None,
                                                     r(1, 2, 16, 8)),
        "linear_block": lambda: linear_block(r(1, 2, 2, 16), r(1, 2, 2, 16), r(1, 2, 2, 16),
                                             r(1, 2, 16, 16), r(1, 2, 16), "elu1", 1e-6),
        "gla_block": lambda: gla_block(r(1, 2, 2, 16), r(1, 2, 2, 16), r(1, 2, 2, 16),
                                       -r(1, 2, 2, 16).exp(), r(1, 2, 16, 16), 0.25),
    }


@pytest.mark.parametrize("op", list(_small_calls()))
def test_cpu_tensors_without_the_interpreter_are_refused(op, monkeypatch):
    call = _small_calls()[op]
    call()  # fine under the interpreter
    monkeypatch.setattr(_common, "interpreting", lambda: False)
    with pytest.raises(KernelError, match="CUDA"):
        call()
