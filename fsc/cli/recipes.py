"""`fsc recipes`: the shipped recipes with a one-line summary each."""

from __future__ import annotations

import typer

from fsc.cli.common import JsonOpt, fmt_count, out, print_json


def recipes(as_json: JsonOpt = False) -> None:
    """List the shipped recipes (name, parameters, layer map, width, depth, block size), the
    variants of them benchmarks tried (`experiments/NAME`), then the published models'
    (`published/NAME`, what `fsc import` makes of their config.json), and the folder that
    holds their files."""
    from rich.table import Table
    from rich.text import Text

    from fsc.costmodel import param_counts
    from fsc.recipe import load_recipe, published_recipes, shipped_dir, shipped_recipes
    from fsc.recipe_yaml import experiment_recipes

    rows = []
    for name, path in {**shipped_recipes(), **experiment_recipes(),
                       **published_recipes()}.items():
        r = load_recipe(path)
        kinds = sorted(set(r.layer_plan))
        counts = ", ".join(f"{r.layer_plan.count(k)} {k}" for k in kinds)
        ffn = (f"moe {r.moe.n_experts}×top{r.moe.top_k}" if r.moe else
               "no mlp" if r.mlp_cfg.kind == "none" else "mlp")
        rows.append({
            "name": name, "path": str(path), "layer_map": r.layer_map, "d_model": r.d_model,
            "n_layers": r.n_layers, "block_size": r.block_size, "dtype": r.dtype,
            "n_params": param_counts(r)["total"],
            "summary": f"d_model {r.d_model}, {r.n_layers} layers ({counts}), {ffn}, G {r.block_size}",
        })
    if as_json:
        print_json(rows)
        return
    folder = Text(f"NAME is the file {shipped_dir() / 'NAME'}.yaml: copy it to change it")
    t = Table(title="shipped recipes", caption=folder)
    for col in ("name", "params", "summary", "layer map"):
        t.add_column(col, justify="right" if col == "params" else "left")
    for row in rows:
        t.add_row(Text(row["name"]), fmt_count(row["n_params"]), row["summary"], row["layer_map"])
    out.print(t)


def register(app: typer.Typer) -> None:
    app.command("recipes")(recipes)
