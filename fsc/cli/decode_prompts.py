"""`fsc decode --prompts`: the prompts of a file decoded in batches, one JSON line a result on
stdout in the file's order, a summary on stderr."""

from __future__ import annotations

import json

from fsc.cli.common import print_plain, say
from fsc.cli.decode_render import summary
from fsc.jsonsafe import plain


def decode_prompts(model, tok, recipe_name: str, records: list[tuple[str, dict]],
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
    say(summary(results, batch))
