"""What a checkpoint says about itself: `config.json` and the `README.md` model card.

Both are derived from the recipe plus facts measured on the model (parameter counts, exact cache
bytes); `fsc_recipe.yaml` is the source of truth for the model, and fsc reads back from
config.json only how the weights were trained (`bos`, `training`). Neither holds a
timestamp, so saving the same weights twice gives identical files.
"""

from __future__ import annotations

import json

import fsc
from fsc.checkpoint.layout import FORMAT_VERSION, INDEX_FILE
from fsc.costmodel.shapes import cache_dtype, kind_shapes
from fsc.mixers import MIXERS
from fsc.recipe import Recipe
from fsc.text import human_bytes

CARD_CONTEXTS = (4096, 32768, 262144)  # S values of the model card's cache table


def config_dict(recipe: Recipe, facts: dict) -> dict:
    """config.json: the recipe's fields, then what fsc derived from them.

    `facts` holds n_params, params_by_kind, weight_bytes, weight_files,
    kv_bytes_per_token, state_bytes_per_sequence, seed (None for trained weights) and bos
    (whether the model's sequences begin with BOS).
    """
    return {
        **recipe.model_dump(mode="json", exclude_none=True),
        "library_name": "fsc",
        "fsc_version": fsc.__version__,
        "format_version": FORMAT_VERSION,
        "recipe_hash": recipe.recipe_hash,
        "layer_plan": recipe.layer_plan,
        "layer_map": recipe.layer_map,
        "G": recipe.block_size,
        **facts,
    }


def config_json(recipe: Recipe, facts: dict) -> str:
    return json.dumps(config_dict(recipe, facts), indent=2) + "\n"


def _tags(recipe: Recipe) -> list[str]:
    kinds = sorted(set(recipe.layer_plan))
    tags = ["fsc", "block-diffusion" if recipe.block_size > 1 else "autoregressive"]
    if len(kinds) > 1:
        tags.append("hybrid")
    tags += [MIXERS[k].tag for k in kinds]
    if recipe.moe is not None:
        tags.append("mixture-of-experts")
    return tags


def _sized(n: int) -> str:
    """Bytes, and from 1 KiB on the same in the binary unit that shows them ('0.000 GiB' would
    hide a small model's cache)."""
    return f"{n:,} ({human_bytes(n)})" if n >= 1024 else f"{n:,}"


def _states(recipe: Recipe) -> str:
    """The fixed-size caches' dtypes in words, as `fsc build` counts them: `state_dtype`
    unless the mixer fixes its own (linear attention's sums are fp32)."""
    dtypes = {shape.kind: cache_dtype(recipe, shape) for shape, _ in kind_shapes(recipe)
              if not shape.growing}
    if not dtypes:
        return "no fixed-size state"
    if len(set(dtypes.values())) == 1:
        return f"{next(iter(dtypes.values()))} fixed-size states"
    return "fixed-size states " + ", ".join(f"{k} {d}" for k, d in dtypes.items())


def _use(recipe: Recipe, facts: dict, files: tuple[str, ...]) -> str:
    """The commands of the card's Use section; a published model imported without a
    tokenizer reads token ids, not text."""
    ids = facts.get("imported_from") is not None and "tokenizer.json" not in files
    prompt = (f"--prompt-ids {','.join(map(str, range(1, min(4, recipe.vocab_size))))}"
              if ids else '--prompt "hello"')
    return f"fsc pull OWNER/NAME --dir my_ckpt\nfsc decode my_ckpt {prompt} --length 64"


def _carried(name: str) -> str:
    if name == "generation_config.json":
        return "the published model's generation settings"
    return "the tokenizer the model reads text with"


def model_card(recipe: Recipe, facts: dict, files: tuple[str, ...] = ()) -> str:
    """README.md with Hub front matter (library_name, tags, a `license: other` placeholder).
    `files`: what the checkpoint carries beyond its recipe, weights and config (a tokenizer)."""
    kv, state = facts["kv_bytes_per_token"], facts["state_bytes_per_sequence"]
    growing = {shape.kind: shape.growing for shape, _ in kind_shapes(recipe)}
    kv_kinds = ", ".join(k for k, g in growing.items() if g) or "no"
    state_kinds = ", ".join(k for k, g in growing.items() if not g) or "no"
    license_line = "license: other  # placeholder: set the real license before publishing"
    front = ["---", "library_name: fsc", license_line, "tags:",
             *[f"- {t}" for t in _tags(recipe)], "---", ""]
    plan = ", ".join(f"{k} {v:,}" for k, v in facts["params_by_kind"].items())
    training = facts.get("training")
    if facts.get("seed") is not None:
        origin = f"Weights: seeded initialisation (seed {facts['seed']}), **not trained**."
    elif facts.get("imported_from") is not None:
        origin = (f"Weights: the published model's, imported by `fsc import` from "
                  f"`{facts['imported_from']}` (renamed to fsc's tensors, values unchanged).")
    elif training is not None:
        lengths = training.get("lengths")  # several (--seq-len 128,256): [[L, weight], ...]
        length = (f"sequence length {training['seq_len']:,}" if not lengths else
                  "sequence lengths " + ", ".join(f"{L:,} (weight {w:g})" for L, w in lengths)
                  + f", each batch at one; training length {training['seq_len']:,}")
        weighting = (f", loss weighting `{training['weighting']}`" if training.get("weighting")
                     else "")
        origin = (f"Weights: trained by `fsc train` for {training['steps']:,} steps on "
                  f"`{training['data']}` (objective `{training['objective']}`{weighting}, "
                  f"{length}), final loss {training['final_loss']:.4f}.")
        if training.get("state_passing"):
            origin += (" Each sequence's fixed-state layers started from the state its row of "
                       "the previous step ended in (--state-passing).")
        if training.get("adapted_from"):
            was = training["adapted_from"]
            published = (f"; the published weights of `{was['imported_from']}`"
                         if was.get("imported_from") else "")
            origin += (f" Adapted from the autoregressive checkpoint `{was['checkpoint']}` "
                       f"({was['recipe']}, G {was['G']}, recipe {was['recipe_hash']}"
                       f"{published}) into a block-diffusion denoiser at G "
                       f"{recipe.block_size}, its weights kept.")
        if training.get("started_from"):
            was = training["started_from"]
            before = (f", itself trained {was['steps']:,} steps on `{was['data']}`"
                      if was.get("steps") is not None else "")
            published = (f"; the published weights of `{was['imported_from']}`"
                         if was.get("imported_from") else "")
            origin += (f" It started from the weights of checkpoint `{was['checkpoint']}` "
                       f"(recipe {was['recipe_hash']}{before}{published}).")
        if training.get("anneal"):
            origin += (f" The block size grew from 1 to G over the first {training['anneal']:,} "
                       "steps (--anneal).")
        if training.get("freeze"):
            origin += (f" Its {', '.join(training['freeze'])} mixers were not trained: they "
                       "kept the weights the run started from (--freeze).")
        if recipe.logit_shift:
            origin += " Position j's logits are read from position j − 1 (logit shift)."
    else:
        origin = "Weights: as saved by their owner (describe the training here)."
    rows = "\n".join(
        f"| {S:,} | {_sized(S * kv)} | {_sized(state)} | {_sized(S * kv + state)} |"
        for S in CARD_CONTEXTS
    )
    index = (f"- `{INDEX_FILE}`: which of those files holds each tensor.\n"
             if len(facts["weight_files"]) > 1 else "")
    carried = "".join(f"- `{f}`: {_carried(f)}, carried with the weights.\n" for f in files)
    body = f"""# {recipe.name}

An fsc checkpoint: a {recipe.n_layers}-layer stack, d_model {recipe.d_model},
vocabulary {recipe.vocab_size}, block size G = {recipe.block_size}, {recipe.dtype} weights,
{_states(recipe)}. {origin}

| fact | value |
| --- | --- |
| recipe hash | `{recipe.recipe_hash}` |
| layer plan (1 = first layer) | `{recipe.layer_map}` |
| attention position encoding | {recipe.position_encoding or "no attention layers"} |
| parameters | {facts['n_params']:,} ({plan}) |
| weight bytes | {facts['weight_bytes']:,} |
| KV cache per token (grows with S; {kv_kinds} layers) | {kv:,} bytes |
| fixed state per sequence ({state_kinds} layers) | {state:,} bytes |

A cache built for block size G = {recipe.block_size} is valid only for that G.

Cache per sequence (B = 1), bytes:

| S (tokens) | KV (growing) | state (fixed) | total |
| --- | --- | --- | --- |
{rows}

## Use

From the Hugging Face Hub (OWNER/NAME: the repository that holds this card), or with this
folder's path in place of `my_ckpt`:

```
{_use(recipe, facts, files)}
```

## Files

- `fsc_recipe.yaml`: the recipe the weights belong to (the source of truth).
- `{'`, `'.join(facts['weight_files'])}`: weights (safetensors).
{index}- `config.json`: the recipe's fields plus the layer plan, parameter and cache facts above.
{carried}- `checksums.sha256`: sha256 of every other file; `sha256sum -c checksums.sha256` checks them.
"""
    return "\n".join(front) + body
