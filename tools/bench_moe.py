"""The MoE's grouped path against its loop over experts (docs/models.md): forward and backward
on 2,048 tokens, one torch thread, the median of a few repeats, at three sizes.

    python -m tools.bench_moe [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from fsc.model.layers import MoE
from tools.options import positive

SIZES = ((4, 2, 64, 128), (16, 2, 256, 1024), (64, 4, 256, 512))  # experts, top k, d, hidden


def _ms(forward, x: torch.Tensor, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):  # the first is a warm-up
        t0 = time.perf_counter()
        forward(x).square().sum().backward()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[1:])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.bench_moe",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=positive, default=5,
                   help="timed forward and backward passes after one warm-up (the median)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    print("| experts, top k, d, hidden | loop ms | grouped ms |")
    print("| --- | ---: | ---: |")
    for n, k, d, hidden in SIZES:
        torch.manual_seed(0)
        moe = MoE(d, hidden, n, k)
        for p_ in moe.parameters():
            torch.nn.init.normal_(p_, std=0.02)
        x = torch.randn(1, 2048, d, requires_grad=True)
        loop, grouped = _ms(moe.forward_loop, x, a.repeats), _ms(moe.forward, x, a.repeats)
        print(f"| {n}, {k}, {d}, {hidden} | {loop:.1f} | {grouped:.1f} |", flush=True)


if __name__ == "__main__":
    main()
