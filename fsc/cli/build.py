"""`fsc build`: validate a recipe, build its model, report its layers, dtypes, FFN and head,
parameters and caches."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fsc.blocks import MAX_B, MAX_S
from fsc.cli.bounds import one_value, point, size
from fsc.cli.common import (
    MAX_SEED,
    JsonOpt,
    StoreOpt,
    check_store,
    err,
    fmt_bytes,
    fmt_count,
    given_options,
    out,
    output_dir,
    print_json,
    printable,
    store_dir,
)
from fsc.errors import UsageError

ONE = "fsc build reports the cache at one point; `fsc profile --dry-run` lists several"


def build(
    ctx: typer.Context,
    recipe: Annotated[str, typer.Argument(
        metavar="RECIPE",
        help="Recipe file, shipped recipe name, checkpoint dir, or a folder with config.json / hf:ORG/NAME.")],
    S: point(str, "--S", 8192, "Context length S for the cache sizes, e.g. 8192 or 8k "
             "(default 8192).", ONE, size(0, MAX_S, "--S")) = None,
    B: point(str, "--B", 1, "Batch B for the cache sizes (default 1).", ONE,
             size(1, MAX_B, "--B")) = None,
    save: Annotated[list[Path] | None, typer.Option(
        "--save", callback=one_value("--save", None, "a checkpoint is written to one directory"),
        metavar="DIR", show_default=False,
        help="Write a checkpoint directory (seeded weights).")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help=(
        "Seed of the random weights."))] = 0,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Validate RECIPE, build its model and report its layer map, dtypes, FFN and head,
    parameters and cache bytes."""
    from fsc.source import has_published_weights, is_checkpoint, load_source_recipe, resolved

    (S,), (B,), (save,) = S, B, save  # one value each (bounds.one_value)

    if save is None and given_options(ctx, ("seed",)):
        raise UsageError("--seed seeds the weights --save writes; give --save DIR or drop --seed")
    if save is None and given_options(ctx, ("store",)):
        raise UsageError("--store records the checkpoint --save writes; give --save DIR or drop "
                         "--store")
    recipe = resolved(recipe)  # a training directory: its newest step
    r = load_source_recipe(recipe)  # a bad recipe is refused before torch is imported
    if save is not None:
        from fsc.loading import check_fits

        dest = output_dir(save, "--save", whole=True)  # absolute: built beside, never inside
        check_store(store)  # before writing what it could not record
        check_fits(r, "cpu")  # the saved weights are built for real, on the CPU
    from fsc.model.lm import build_report

    report = build_report(r, S, B)
    # what the recipe asked for beyond the layer map: each fixed-size cache's dtype (a mixer
    # may fix its own: linear attention's are fp32), the FFN, the head
    report |= {"state_dtypes": _state_dtypes(r), "ffn": _ffn(r),
               "tie_embeddings": r.tie_embeddings, "logit_shift": r.logit_shift}
    if save is not None:
        from fsc.checkpoint.io import save_checkpoint
        from fsc.model.lm import build_model

        weights = (f" (seeded weights, not those of {recipe})"
                   if is_checkpoint(recipe) or has_published_weights(recipe) else "")
        err.print(f"building {r.name} with seed {seed}{weights} and writing {save} ...",
                  markup=False, highlight=False, soft_wrap=True)
        from fsc.checkpoint.registry import register_checkpoint

        info = save_checkpoint(build_model(r, seed=seed), dest, seed=seed)
        register_checkpoint(store_dir(store), info, "saved")
        report["saved"] = info.to_dict()
    if as_json:
        print_json(report)
        return
    _render(report)


def _render(rep: dict) -> None:
    from rich.table import Table
    from rich.text import Text

    built = ("shapes only, on torch's meta device: no weights allocated"
             if rep["built_on"] == "meta" else f"built on {rep['built_on']}")
    out.print(Text.assemble((printable(rep["name"]), "bold"),
                            f"  hash {rep['recipe_hash']}  ({built})"))
    out.print(f"layers  {rep['layer_map']}   G {rep['block_size']}, {rep['dtype']} weights, "
              f"{_states(rep)}")
    head = "tied to the embedding" if rep["tie_embeddings"] else "its own matrix"
    shift = ", logits shifted (position j read from j - 1)" if rep["logit_shift"] else ""
    out.print(f"ffn  {rep['ffn']}   head  {head}{shift}")
    if rep["position_encoding"] is not None:
        out.print(f"attention position encoding  {rep['position_encoding']}")
    t = Table(title="parameters")
    t.add_column("component")
    t.add_column("params", justify="right")
    for k, v in rep["params_by_kind"].items():
        t.add_row(k, fmt_count(v))
    t.add_row(Text("total", "bold"), Text(fmt_count(rep["n_params"]), "bold"))
    out.print(t)
    c = rep["cache"]
    out.print(f"weights {fmt_bytes(rep['weight_bytes'])}   cache at S={c['S']}, B={c['B']}: "
              f"KV (growing) {fmt_bytes(c['kv_bytes'])}, state (fixed) {fmt_bytes(c['state_bytes'])}, "
              f"total {fmt_bytes(c['total_bytes'])}")
    if "saved" in rep:
        out.print(f"checkpoint written to {rep['saved'].get('path')}", markup=False)


def _state_dtypes(r) -> dict[str, str]:
    """The dtype of each kind's fixed-size cache (a recurrent state, a sliding window's ring),
    as the cost model counts it: `state_dtype` unless the mixer fixes its own (linear
    attention's sums fp32, a window's ring `dtype`). Empty when every cache grows."""
    from fsc.costmodel.shapes import cache_dtype, kind_shapes

    return {shape.kind: cache_dtype(r, shape) for shape, _ in kind_shapes(r)
            if not shape.growing}


def _ffn(r) -> str:
    """The FFN of every layer in words, e.g. ``moe: 4 gelu experts of width 128, top 2``."""
    d, m = r.d_model, r.moe
    if m is not None:
        text = f"moe: {m.n_experts} {m.kind} experts of width {m.width(d)}, top {m.top_k}"
        if m.shared_hidden is not None:
            text += (f", a shared expert of width {m.shared_hidden}"
                     + (" (gated)" if m.shared_gate else ""))
        return text
    mlp = r.mlp_cfg
    return "none" if mlp.kind == "none" else f"mlp: {mlp.kind}, width {mlp.width(d)}"


def _states(rep: dict) -> str:
    """The fixed-size caches' dtypes: ``bf16 states``, ``states: mamba bf16, linear fp32``, and
    whether the recipe's state_dtype is used at all."""
    dtypes, asked = rep["state_dtypes"], rep["state_dtype"]
    if set(dtypes.values()) == {asked}:
        return f"{asked} states"
    unused = f"state_dtype {asked} unused"
    if not dtypes:
        return f"no fixed-size state ({unused})"
    text = "states: " + ", ".join(f"{kind} {d}" for kind, d in dtypes.items())
    return text + ("" if asked in dtypes.values() else f" ({unused})")


def register(app: typer.Typer) -> None:
    app.command("build")(build)
