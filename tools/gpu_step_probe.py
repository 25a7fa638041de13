"""Where a decode step's time goes on a GPU: the device's work or the host's issuing of it.

    python3 -m tools.gpu_step_probe [--recipes mamba_3b,attn_3b,hybrid_3b] [--S 4096] [--B 1]

For each recipe (bf16, random weights, a synthetic cache of S tokens, one block of G tokens,
as `fsc profile` times a step), it prints one JSON line with:
- `eager_ms`: the step's median time (CUDA events), as `fsc profile` reports it;
- `issue_ms`: the host's time to issue the step (the call's wall time before a synchronize);
  close to `eager_ms` means the GPU waits on Python;
- `kernels`, `syncs`: CUDA kernel launches and host-device synchronisations a step, from the
  torch profiler, and `gpu_busy_ms`, the kernels' summed time;
- `graph_ms`: the same step captured once as a CUDA graph and replayed, with `graph_max_diff`
  against the eager logits (or `graph_error` where capture fails, which names what stops it).
`--device cpu` runs the loop on tiny recipes without the GPU parts (a dry run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from fsc.model.lm import build_model
from fsc.profile import Timer
from fsc.recipe import load_recipe


def events_ms(fn, n: int) -> float:
    """The median of n timings of `fn` in ms, by CUDA events (as `fsc profile` times a step)."""
    timer = Timer(torch.device("cuda"))
    return statistics.median(timer(fn) for _ in range(n))


def profile_counts(fn) -> dict:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = prof.key_averages()
    kernels = sum(e.count for e in events if e.device_type.name == "CUDA")
    busy = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA") / 1e3
    syncs = sum(e.count for e in events
                if any(s in e.key for s in ("Synchronize", "cudaMemcpy", "item", "_local_scalar")))
    top = sorted((e for e in events if e.device_type.name == "CPU"),
                 key=lambda e: e.self_cpu_time_total, reverse=True)[:12]
    return {"kernels": kernels, "gpu_busy_ms": busy, "syncs": syncs,
            "top_cpu_ops": [[e.key, e.count, round(e.self_cpu_time_total / 1e3, 3)] for e in top]}


def graph_step(model, tokens, cache, want) -> dict:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(tokens, cache)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = model(tokens, cache)
    graph.replay()
    torch.cuda.synchronize()
    diff = (out.float() - want.float()).abs().max().item()
    return {"graph_ms": events_ms(graph.replay, 20), "graph_max_diff": diff}


@torch.no_grad()
def probe(name: str, S: int, B: int, device: torch.device) -> dict:
    recipe = load_recipe(name)
    cuda = device.type == "cuda"
    model = build_model(recipe, device=device, dtype=torch.bfloat16 if cuda else torch.float32).eval()
    G = recipe.block_size
    cache = model.synthetic_cache(B, S, device, seed=0, capacity=S + G, block_size=G)
    tokens = torch.randint(0, recipe.vocab_size, (B, G), generator=torch.Generator().manual_seed(0)).to(device)

    def step():
        return model(tokens, cache)

    for _ in range(5):
        want = step()
    row = {"recipe": name, "S": S, "B": B, "G": G}
    if not cuda:
        t0 = time.perf_counter()
        step()
        row["eager_ms"] = (time.perf_counter() - t0) * 1e3
        return row
    torch.cuda.synchronize()
    row["eager_ms"] = events_ms(step, 20)
    issue = []
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        issue.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
    row["issue_ms"] = statistics.median(issue)
    try:
        row.update(profile_counts(step))
    except Exception as e:  # noqa: BLE001 - a probe: report and go on
        row["profile_error"] = repr(e)[:300]
    try:
        row.update(graph_step(model, tokens, cache, want))
    except Exception as e:  # noqa: BLE001 - what stops capture is the finding
        row["graph_error"] = repr(e)[:500]
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipes", default="mamba_3b,attn_3b,hybrid_3b")
    p.add_argument("--S", type=int, default=4096)
    p.add_argument("--B", type=int, default=1)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    device = torch.device(a.device)
    for name in a.recipes.split(","):
        try:
            row = probe(name, a.S, a.B, device)
        except Exception as e:  # noqa: BLE001
            row = {"recipe": name, "error": repr(e)[:500]}
        print(json.dumps(row), flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
