"""Supervised tokens per second of the `blocks` objective against `frontier` (docs/training.md).

    python -m tools.bench_blocks [--recipes tiny_attn,tiny_mamba] [--seq-len 128] [--batch 8]
        [--repeats 15] [--data passkey,text]

One optimizer step (forward, backward, AdamW) per recipe × data × objective, taken in turn
(round robin after 2 warm-up steps, one torch thread) so that a machine whose load changes
slows them alike; the median step time, and per step the supervised positions of the blocks
the loss scores (`frontier`: one block a sequence; `blocks`: every block that holds
supervised positions) and the masked positions among them. `passkey` supervises the answer's
blocks; `text` (random bytes) every block. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from fsc.data.tasks import Passkey
from fsc.model.lm import build_model
from fsc.objective import Batch, blocks_loss, draw_blocks, draw_frontier, frontier_loss
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer
from fsc.train.loop import TrainConfig, make_optimizer
from tools.options import boundary, names, positive, renamed

OBJECTIVES = ("frontier", "blocks")
DATA = ("passkey", "text")


def _batches(data: str, L: int, G: int, B: int):
    tok = ByteTokenizer()
    if data == "passkey":
        task = Passkey(tok, L, G)
        return lambda i: Batch.of([task.sample(i * B + j) for j in range(B)], "cpu")
    gen = torch.Generator().manual_seed(0)
    return lambda i: Batch(torch.randint(0, 256, (B, L), generator=gen),
                           torch.ones(B, L, dtype=torch.bool))


class Cell:
    """One recipe, data and objective: a model, its optimizer and its batches."""

    def __init__(self, recipe: str, data: str, objective: str, L: int, B: int):
        self.recipe = load_recipe(recipe)
        self.G = self.recipe.block_size
        self.model = build_model(self.recipe, seed=0)
        self.opt = make_optimizer(self.model, TrainConfig(recipe, data, L, 1, "-"))
        self.batch, self.objective = _batches(data, L, self.G, B), objective
        self.times, self.supervised, self.masked, self.i = [], [], [], 0

    def step(self, timed: bool) -> None:
        batch = self.batch(self.i)
        gen = torch.Generator().manual_seed(self.i)
        self.i += 1
        t0 = time.perf_counter()
        if self.objective == "frontier":
            d = draw_frontier(batch, self.G, ByteTokenizer.mask_id, gen)
            loss, _ = frontier_loss(self.model, d, "masked")
        else:
            d = draw_blocks(batch, self.G, ByteTokenizer.mask_id, gen)
            loss, _ = blocks_loss(self.model, d, "masked")
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if timed:
            self.times.append(time.perf_counter() - t0)
            self.supervised.append(int(d.supervised.sum()))
            self.masked.append(int(d.masked.sum()))

    def result(self) -> dict:
        ms = statistics.median(self.times) * 1e3
        sup, masked = statistics.mean(self.supervised), statistics.mean(self.masked)
        return {"step_ms": ms, "supervised_per_step": sup, "masked_per_step": masked,
                "supervised_per_s": sup / ms * 1e3, "masked_per_s": masked / ms * 1e3}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tools.bench_blocks",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", default="tiny_attn,tiny_mamba", help="comma-separated")
    ap.add_argument("--data", type=names(DATA), default=["passkey", "text"],
                    help=f"comma-separated, some of {', '.join(DATA)}")
    ap.add_argument("--seq-len", type=positive, default=128)
    ap.add_argument("--batch", type=positive, default=8)
    ap.add_argument("--repeats", type=positive, default=15, help="timed optimizer steps per cell")
    renamed(ap, "--steps", "--repeats", type=positive)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cells = {(r, d, o): Cell(r, d, o, a.seq_len, a.batch) for r in a.recipes.split(",")
             for d in a.data for o in OBJECTIVES}
    for i in range(a.repeats + 2):
        for cell in cells.values():
            cell.step(timed=i >= 2)
    rows = []
    print(f"{'recipe':<12} {'data':<8} {'objective':<9} {'ms/step':>8} {'sup/step':>9} "
          f"{'sup tok/s':>10} {'masked tok/s':>12} {'blocks/frontier':>15}")
    for (r, d, o), cell in cells.items():
        res = {"recipe": r, "data": d, "objective": o, **cell.result()}
        base = cells[(r, d, "frontier")].result()["supervised_per_s"]
        res["supervised_per_s_vs_frontier"] = res["supervised_per_s"] / base
        rows.append(res)
        print(f"{r:<12} {d:<8} {o:<9} {res['step_ms']:>8.1f} {res['supervised_per_step']:>9.1f} "
              f"{res['supervised_per_s']:>10.0f} {res['masked_per_s']:>12.0f} "
              f"{res['supervised_per_s_vs_frontier']:>14.2f}×")
    print(json.dumps({"seq_len": a.seq_len, "batch": a.batch, "threads": 1, "rows": rows}))


if __name__ == "__main__":
    boundary(main, "python -m tools.bench_blocks")
