"""`fsc decode --prompts`: the prompts of a file decoded in batches, one JSON line a result on
stdout in the file's order, a summary on stderr."""

from __future__ import annotations

import json

from fsc.cli.common import print_plain, say
from fsc.jsonsafe import plain
from fsc.text import counted


def decode_prompts(model, tok, recipe_name: str, records: list[tuple[int, dict]],
                   rows: list[list[int]], cfg, device: str, batch: int, weights: str) -> None:
    """Decode `rows` (the token ids of each record's prompt) `batch` at a time; row i draws
    from the seed `fsc.seeds.derive(cfg.seed, i)`, which its stats give, so that rows are
    independent of each other and of the batch they share."""
    from fsc import ops
    from fsc.decode import generate_batch
    from fsc.seeds import derive

    seeds = [derive(cfg.seed, i) for i in range(len(rows))]
    with ops.trace() as ran:
        results = generate_batch(model, tok, rows, cfg, device, seeds, batch)
    for (_, record), ids, seed, res in zip(records, rows, seeds, results, strict=True):
        doc = {**record, "recipe": recipe_name, "prompt_ids": ids,
               "text": tok.decode(res.token_ids), "token_ids": res.token_ids,
               "stats": {**res.stats, "seed": seed, "backends": ran.backends,
                         "weights": weights}}
        print_plain(json.dumps(plain(doc), default=str, allow_nan=False) + "\n")
    firsts = list({r.stats["batch_index"]: r.stats for r in results}.values())  # a batch's
    made = sum(len(r.token_ids) for r in results)
    generate_s = sum(s["generate_s"] for s in firsts)
    rate = f"{made / generate_s:.1f} tok/s" if generate_s > 0 else "- tok/s"
    s = firsts[0]
    steps = f", K {s['K']}" if s["K"] else ""
    say(f"{counted(len(rows), 'prompt')} in {counted(len(firsts), 'batch', 'batches')} "
        f"(--batch {batch}), {counted(made, 'token')} generated, {rate} ({s['mode']}, "
        f"G {s['G']}{steps}, {device}); prompts folded in "
        f"{sum(s['prefill_s'] for s in firsts):.3g} s")
