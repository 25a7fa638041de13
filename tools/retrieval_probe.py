"""Which layers of a trained hybrid carry the pass key: evaluate a checkpoint as `fsc eval`
does (passkey, the same prompts, the cached decoder), with its attention layers changed at
evaluation time only.

    python -m tools.retrieval_probe CHECKPOINT|RUN_DIR [--lengths 128,256] [--window W] [--scale C]

--window W: every attention layer reads only the W tokens before its block (a ring cache, as
`attention.window` trains): if retrieval holds where the needle is farther than W, the
recurrent layers carried the key. --scale C: every attention layer's queries times C (a
softmax temperature; C = 0 attends uniformly). Prints exact match by length and needle depth.
"""

from __future__ import annotations

import argparse

import torch

from fsc.data.tasks import Passkey
from fsc.eval.grid import DEFAULT_DEPTHS, EvalSettings
from fsc.eval.retrieval import _cell
from fsc.eval.tasks import model_to_score
from fsc.model.attention import Attention
from fsc.seeds import derive
from fsc.source import checkpoint_tokenizer, resolve_checkpoint
from fsc.tokenizer import load_tokenizer
from tools.options import boundary, positive, positives


def probe(checkpoint: str, lengths: list[int], window: int | None, scale: float,
          samples: int = 20) -> dict[int, list[float]]:
    """Exact match by length, one value per depth of DEFAULT_DEPTHS (fsc eval's prompts) of a
    checkpoint or a training directory (its newest)."""
    checkpoint = str(resolve_checkpoint(checkpoint))
    # the window as `fsc eval --set attention.window=W` sets it: the recipe's, weights as trained
    model = model_to_score(checkpoint, "cpu", 0, False,
                           (f"attention.window={window}",) if window is not None else ())
    tok = load_tokenizer(checkpoint_tokenizer(checkpoint))
    if scale != 1.0:
        for layer in model.layers:
            m = layer.mixer
            if isinstance(m, Attention):
                qkv = m._qkv
                m._qkv = lambda *args, qkv=qkv: (lambda q, k, v: (q * scale, k, v))(*qkv(*args))
    G = model.recipe.block_size
    settings = EvalSettings("diffusion", G, samples, samples, 0, None)
    out = {}
    for n in lengths:
        task = Passkey(tok, n, G)
        out[n] = [_cell(model, tok, [task.sample(derive(0, n, round(d * 1e6), i, 5), d)
                                     for i in range(samples)], settings, "cpu")["accuracy"]
                  for d in DEFAULT_DEPTHS]
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m tools.retrieval_probe",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("checkpoint", help="a checkpoint, or a training directory (its newest)")
    p.add_argument("--lengths", type=positives, default=[128, 256],
                   help="prompt lengths, comma-separated (default 128,256)")
    p.add_argument("--window", type=positive, default=None,
                   help="attention reads only the W tokens before its block")
    p.add_argument("--scale", type=float, default=1.0,
                   help="attention's queries times C (0: uniform attention)")
    p.add_argument("--samples", type=positive, default=20, help="prompts per depth")
    a = p.parse_args()
    torch.set_num_threads(1)
    result = probe(a.checkpoint, a.lengths, a.window, a.scale, a.samples)
    print("length  " + "  ".join(f"depth {d:g}" for d in DEFAULT_DEPTHS) + "  mean")
    for n, accs in result.items():
        print(f"{n:6d}  " + "  ".join(f"{x:7.2f}" for x in accs) + f"  {sum(accs) / len(accs):.2f}")


if __name__ == "__main__":
    boundary(main, "python -m tools.retrieval_probe")
