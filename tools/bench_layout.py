"""Linear weights by rows or by columns on the CPU (docs/benchmarks.md section 17,
fsc.model.cpu_layout): `F.linear` over Qwen3-0.6B's 196 projection matrices and its head,
random fp32 weights, one thread, for passes of 1, 8 and 64 tokens.

    python -m tools.bench_layout [--rounds 3]

Each round times one pass over every matrix in each layout, by turns; prints the median and the
range over rounds, and the GB/s of the weights read.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

LAYER = [(2048, 1024), (1024, 1024), (1024, 1024), (1024, 2048), (3072, 1024), (3072, 1024),
         (1024, 3072)]  # q, k, v, o, gate, up, down of Qwen3-0.6B
SHAPES = LAYER * 28 + [(151936, 1024)]  # and the tied head


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    rows = [torch.randn(n, k, generator=gen) for n, k in SHAPES]
    cols = [w.t().contiguous().t() for w in rows]
    gb = sum(w.numel() * w.element_size() for w in rows) / 1e9
    print(f"{len(rows)} matrices, {gb:.2f} GB; ms a pass, median [range] of {a.rounds} rounds")
    with torch.inference_mode():
        for tokens in (1, 8, 64):
            xs = {k: torch.randn(tokens, k, generator=gen) for k in (1024, 2048, 3072)}
            times = {"rows": [], "columns": []}
            for _ in range(a.rounds + 1):  # the first round warms up
                for name, ws in (("rows", rows), ("columns", cols)):
                    t0 = time.perf_counter()
                    for w in ws:
                        F.linear(xs[w.shape[1]], w)
                    times[name].append((time.perf_counter() - t0) * 1e3)
            cells = []
            for name, ts in times.items():
                ts = ts[1:]
                med = statistics.median(ts)
                cells.append(f"{name} {med:7.1f} [{min(ts):.1f}–{max(ts):.1f}] ({gb / med * 1e3:.1f} GB/s)")
            print(f"{tokens:>2} tokens: " + " | ".join(cells))


if __name__ == "__main__":
    main()
