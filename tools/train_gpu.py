"""Training throughput of the 3B-width recipes on a GPU (`make gpu-train`): tokens/s and MFU of
`fsc train`'s step (--objective, passkey at --seq-len, bf16 autocast, fp32 master weights and
AdamW moments), median of --repeats steps after 2 warm-up steps, on each training backend of
--backends (torch: the chunked forms; fla: flash-linear-attention's kernels, where fla is
installed; a recipe without recurrent layers runs on torch alone).

    python3 -m tools.train_gpu [--recipes attn_3b,mamba_3b,hybrid_3b] [--seq-len 1024] [--batch 4]
                               [--backends torch,fla] [--objective frontier]

MFU counts 6 FLOPs per parameter a token passes (MoE: its top-k experts) per token read (forward and backward of every matrix) plus
attention's score and value products (12 * layers * heads * head_dim * T per token, halved
for the block-causal mask), against the device's dense bf16 peak (fsc.costmodel.devices).
Prints one JSON line per recipe and backend.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

from fsc.costmodel import DEVICES
from fsc.errors import UsageError
from fsc.model.fla_scan import train_backend
from fsc.model.lm import build_model, count_params
from fsc.profile import device_spec_for
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer
from fsc.train.loop import TrainConfig, Trainer


def flops_per_token(recipe, n_params: int, T: int) -> float:
    attn = sum(1 for k in recipe.layer_plan if k == "attention")
    a = recipe.attention
    score = 12 * attn * (a.n_heads * a.head_dim if a else 0) * T / 2 if attn else 0
    return 6 * n_params + score


def runs(recipes: list[str], backends: list[str], device) -> list[tuple[str, str]]:
    """(recipe, backend) pairs to measure: fla only where it can run (said on stderr
    otherwise), and only for recipes with a recurrent layer (attention has no fla form)."""
    usable = []
    for backend in backends:
        try:
            train_backend(backend, device)
            usable.append(backend)
        except UsageError as e:
            print(f"skipping backend {backend}: {e}", file=sys.stderr)
    return [(name, b) for name in recipes for b in usable
            if b == "torch" or set(load_recipe(name).layer_plan) != {"attention"}]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipes", default="attn_3b,mamba_3b,hybrid_3b")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cuda", help="cpu runs the same loop (a dry run)")
    p.add_argument("--backends", default="torch,fla")
    p.add_argument("--objective", default="frontier", choices=["frontier", "blocks"])
    a = p.parse_args()
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    spec = device_spec_for(device) or DEVICES["h100"]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    tmp = Path(tempfile.mkdtemp())
    try:
        for name, backend in runs(a.recipes.split(","), a.backends.split(","), device):
            recipe = load_recipe(name)
            model = build_model(recipe, device=device, dtype=torch.float32,
                                state_dtype=torch.float32)
            counts = count_params(model)
            n = counts["total"]
            if recipe.moe is not None:  # a token passes top_k of the experts
                n -= counts["moe"] * (1 - recipe.moe.top_k / recipe.moe.n_experts)
            cfg = TrainConfig(source=name, data="passkey", seq_len=a.seq_len, steps=100,
                              out=str(tmp / name), batch=a.batch, device=str(device),
                              dtype="bf16" if cuda else "fp32", objective=a.objective,
                              train_backend=backend)
            trainer = Trainer(cfg, recipe, model, ByteTokenizer())
            times = []
            for i in range(2 + a.repeats):
                sync()
                t0 = time.perf_counter()
                _, _, tokens = trainer.train_step()
                sync()
                if i >= 2:
                    times.append(time.perf_counter() - t0)
            s = sorted(times)[len(times) // 2]
            rate = tokens / s
            mfu = rate * flops_per_token(recipe, n, a.seq_len) / spec.peak_flops
            print(json.dumps({"recipe": name, "backend": backend, "objective": a.objective,
                              "active_params": n, "seq_len": a.seq_len,
                              "batch": a.batch, "step_s": s, "tokens_per_s": rate, "mfu": mfu,
                              "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
                              "device": spec.name if cuda else "cpu"}), flush=True)
            del trainer, model
            if cuda:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
