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

from tools.bench_decode import _config
from tools.options import positive


def qwen3_shapes() -> list[tuple[int, int]]:
    """[out, in] of each weight a token of Qwen3-0.6B's shape reads, from the config
    tools.bench_decode builds: per layer q, k, v, o, gate, up, down; then the tied head."""
    c = _config("qwen3-0.6b")
    d, hd, f = c.hidden_size, c.head_dim, c.intermediate_size
    q, kv = c.num_attention_heads * hd, c.num_key_value_heads * hd
    layer = [(q, d), (kv, d), (kv, d), (d, q), (f, d), (f, d), (d, f)]
    return layer * c.num_hidden_layers + [(c.vocab_size, d)]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m tools.bench_layout",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=positive, default=3,
                   help="timed rounds after one warm-up round (median and range)")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    rows = [torch.randn(n, k, generator=gen) for n, k in qwen3_shapes()]
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
