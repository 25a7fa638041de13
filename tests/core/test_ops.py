"""fsc.ops records the backend each op ran on only in the traces its caller holds."""

import threading

import torch

from fsc import ops


def _conv():
    x, window = torch.randn(1, 2, 3), torch.randn(1, 3, 3)  # [B, G, C], [B, C, W - 1]
    ops.call("causal_conv_block", x, window, torch.randn(3, 4), torch.randn(3))


def _gla():
    q, k, v = (torch.randn(1, 2, 1, 4) for _ in range(3))  # [B, G, H, D]
    ops.call("gla_block", q, k, v, -torch.rand(1, 2, 1, 4), torch.randn(1, 1, 4, 4), 0.5)


def test_a_trace_holds_the_ops_of_its_block_only():
    _conv()  # outside any trace: recorded nowhere
    with ops.trace() as t:
        _gla()
    _conv()  # after the block
    assert t.backends == {"gla_block": "torch"}
    with ops.trace() as fresh:
        pass
    assert fresh.backends == {}


def test_a_trace_sees_the_ops_of_the_traces_inside_it():
    with ops.trace() as outer:
        _conv()
        with ops.trace() as inner:
            _gla()
    assert outer.backends == {"causal_conv_block": "torch", "gla_block": "torch"}
    assert inner.backends == {"gla_block": "torch"}


def test_traces_held_at_once_by_two_callers_do_not_see_each_other():
    both_open = threading.Barrier(2, timeout=60)
    traces = {}

    def caller(name, op):
        with ops.trace() as t:
            both_open.wait()
            op()
            both_open.wait()  # the other caller's op has run too
        traces[name] = t.backends

    threads = [threading.Thread(target=caller, args=a) for a in (("a", _conv), ("b", _gla))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert traces == {"a": {"causal_conv_block": "torch"}, "b": {"gla_block": "torch"}}



def test_auto_runs_the_reference_where_a_kernel_cannot_hold_the_block():
    """On CUDA, `auto` picked the Triton kernel whatever the block: mamba's and linear
    attention's hold at most MAX_G tokens in one tile, so a recipe of block_size 200 failed at
    its first step ("a block of G = 200 tokens exceeds the 128 this kernel holds")."""
    from fsc.kernels._common import MAX_G

    for op in ("mamba_block_scan", "linear_block"):
        assert ops._auto(op, "cuda", (torch.zeros(1, MAX_G, 2, 4),)) == "triton"
        assert ops._auto(op, "cuda", (torch.zeros(1, MAX_G + 1, 2, 4),)) == "torch"
        assert ops._auto(op, "cpu", (torch.zeros(1, 4, 2, 4),)) == "torch"
    assert ops._auto("block_attention", "cuda", (torch.zeros(1, 4 * MAX_G, 2, 4),)) == "triton"
