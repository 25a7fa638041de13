"""`fsc decode`: block-diffusion or autoregressive generation from a recipe or checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fsc.cli.common import (
    BackendOpt,
    JsonOpt,
    SeedOpt,
    out,
    print_json,
    torch_device,
    torch_threads,
)


def decode(
    source: Annotated[str, typer.Argument(help="Recipe file, shipped recipe name or checkpoint dir.")],
    prompt: Annotated[str, typer.Option("--prompt", help="Prompt text.")] = "",
    length: Annotated[int, typer.Option("--length", help="Tokens to generate (at most).")] = 64,
    G: Annotated[int | None, typer.Option("--G", help="Block size G (default: the recipe's).")] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", help="Denoising steps K per block (default: G).")
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", help="diffusion or ar (default: ar when the recipe's G is 1)."),
    ] = None,
    temperature: Annotated[float, typer.Option("--temperature", help="0 is greedy.")] = 0.0,
    top_p: Annotated[float, typer.Option("--top-p", help="Nucleus sampling mass.")] = 1.0,
    threshold: Annotated[
        float | None,
        typer.Option("--threshold", help="Also reveal masked positions at least this confident."),
    ] = None,
    seed: SeedOpt = 0,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Recompute the whole prefix at every step.")
    ] = False,
    tokenizer: Annotated[
        Path | None, typer.Option("--tokenizer", help="Local Hugging Face tokenizer directory.")
    ] = None,
    backend: BackendOpt = "auto",
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")] = "cpu",
    as_json: JsonOpt = False,
) -> None:
    """Generate text; prints it with tokens, blocks, forward passes and tokens/s."""
    from fsc import ops
    from fsc.decode import DecodeConfig, generate
    from fsc.source import load_model
    from fsc.tokenizer import load_tokenizer

    ops.use_backend(backend)
    torch_threads()
    device = torch_device(device)
    tok = load_tokenizer(tokenizer)
    recipe, model = load_model(source, device=device, seed=seed)
    mode = mode or ("ar" if recipe.block_size == 1 else "diffusion")
    g = recipe.block_size if G is None else G
    cfg = DecodeConfig(length=length, G=g, steps=g if steps is None else steps, mode=mode, temperature=temperature,
                       top_p=top_p, threshold=threshold, seed=seed, use_cache=not no_cache)
    bos = [tok.bos_id] if getattr(tok, "bos_id", None) is not None else []
    res = generate(model, tok, bos + tok.encode(prompt), cfg, device=device)
    res.stats["backends"] = dict(ops.ran)
    text = tok.decode(res.token_ids)
    if as_json:
        print_json({"recipe": recipe.name, "prompt": prompt, "text": text,
                    "token_ids": res.token_ids, "stats": res.stats})
        return
    out.print(prompt, end="", markup=False, highlight=False)
    out.print(text, style="bold", markup=False, highlight=False)
    s = res.stats
    steps_part = f", K {s['K']}" if s["K"] else ""
    out.print(
        f"[dim]{s['tokens']} tokens, {s['blocks']} blocks, {s['forward_passes']} forward passes, "
        f"{s['tokens_per_s']:.1f} tok/s ({s['mode']}, G {s['G']}{steps_part}, "
        f"{'cached' if s['cached'] else 'no cache'})[/]"
    )


def register(app: typer.Typer) -> None:
    app.command("decode")(decode)
