"""`fsc verify`: cached versus uncached block-causal forward, per mixer kind: exact in fp32, and
the drift over a long run in bf16/fp16."""

from __future__ import annotations

import shlex
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from fsc.cli.bars import terminal_bar
from fsc.cli.bounds import size
from fsc.cli.common import (
    MAX_SEED,
    Backend,
    BackendOpt,
    DeviceOpt,
    DType,
    JsonOpt,
    given_options,
    out,
    print_json,
    printable,
    torch_device,
    torch_threads,
)
from fsc.errors import UsageError
from fsc.verify_report import MAX_BATCH, MAX_FP32_WEIGHT_BYTES, MAX_TOKENS


class Against(str, Enum):
    transformers = "transformers"


# What --against fixes itself (fp32, G 1, one sequence on the CPU, its own length): none of
# these may be given with it.
NOT_WITH_AGAINST = ("G", "B", "blocks", "length", "dtype", "backend", "device")


def verify(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(
        metavar="SOURCE",
        help="Recipe file, shipped recipe name, checkpoint dir or published model (a folder "
             "with config.json, and its weights where it has them; published/NAME; "
             "hf:ORG/NAME[@REV], its config); with --against, a published model with weights "
             "or a checkpoint `fsc import` wrote.")],
    G: Annotated[int | None, typer.Option(
        "--G", help="Block size (default: the recipe's; in fp32 at least 2 for a denoiser, "
                     "whose blocks see themselves).")] = None,
    B: Annotated[int, typer.Option("--B", min=1, max=MAX_BATCH, help="Batch.")] = 2,
    blocks: Annotated[int | None, typer.Option(
        "--blocks", min=2, max=MAX_TOKENS,
        help="Blocks decoded (default: 3 in fp32, or past the attention window where there is "
             "one; 1024 tokens' worth in bf16/fp16).")] = None,
    length: Annotated[str | None, typer.Option(
        "--length", callback=size(1, MAX_TOKENS, "--length"), show_default=False,
        help="Tokens decoded, instead of --blocks, e.g. 256 or 1k: rounded up to whole "
        "blocks, as the title says.")] = None,
    dtype: Annotated[DType, typer.Option(
        "--dtype", help="fp32: exactness. bf16/fp16: the recipe's states, drift against fp32.")
    ] = DType.fp32,
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help=(
        "Seed of a recipe's random weights and of the checked tokens and "
        "inputs."))] = 0,
    backend: BackendOpt = Backend.auto,
    device: DeviceOpt = "auto",
    against: Annotated[Against | None, typer.Option(
        "--against", help="transformers: fsc's cached decode (G 1, fp32) of a published model "
                          "against transformers on the same weights: logits and 32 greedy "
                          "tokens.")] = None,
    prompt_ids: Annotated[str | None, typer.Option(
        "--prompt-ids", help="With --against: the prompt's token ids (default: 8 seeded ids).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check the cached path on this machine; exits 1 when it is not exact (fp32) or drifts
    past the tolerance (bf16/fp16), or, with --against, differs from the reference."""
    if against is not None:
        if given := given_options(ctx, NOT_WITH_AGAINST):
            raise UsageError(f"{', '.join(given)} cannot go with --against, which checks one "
                             "sequence at G 1 in fp32 on the CPU")
        if prompt_ids is not None and given_options(ctx, ("seed",)):
            raise UsageError("--seed draws the prompt of --against; give it or --prompt-ids, "
                             "not both")
        _against(source, prompt_ids, seed, as_json)
        return
    if prompt_ids is not None:
        raise UsageError("--prompt-ids goes with --against (the exactness check draws its own)")
    from fsc.source import is_checkpoint, load_source_recipe, resolved
    from fsc.verify_report import plan

    source = resolved(source)  # a training directory: its newest step

    # Everything a user can get wrong is checked before torch is imported.
    recipe = load_source_recipe(source)
    G, blocks = plan(recipe, str(dtype), G, blocks, length)

    from fsc import ops
    from fsc.verify import verify as run_verify

    ops.use_backend(str(backend))
    torch_threads()
    device = torch_device(device)
    if backend == Backend.triton and not device.startswith("cuda") and not ops.interpreting():
        raise UsageError(f"--backend triton needs a CUDA device, not {device} (give --device "
                         "cuda, or --backend torch or auto)")
    with ops.trace() as ran, terminal_bar("checking, blocks") as progress:
        report = run_verify(recipe, G=G, B=B, n_blocks=blocks, seed=seed, device=device,
                            checkpoint=Path(source) if is_checkpoint(source) else None,
                            dtype=str(dtype), published=_published_weights(source),
                            progress=progress)
    report.backends = ran.backends
    if backend == Backend.triton:
        from fsc.kernels.selfcheck import check_kernels

        report.kernels = check_kernels(device)
    if as_json:
        print_json(report.to_dict())
    else:
        _render(report)
    if not report.exact:
        raise typer.Exit(1)


def _published_weights(source: str) -> str | None:
    """A local published folder with weights (the rule of `fsc import`): verified with them."""
    from fsc.imports import has_weights, is_import_source, local_dir

    if source.startswith("hf:") or not is_import_source(source):
        return None
    return source if has_weights(local_dir(source)) else None


def _against(source: str, prompt_ids: str | None, seed: int, as_json: bool) -> None:
    from fsc.blocks import parse_ids
    from fsc.imports import has_weights, import_config, is_import_source, local_dir
    from fsc.source import is_checkpoint, published_origin, resolved

    checkpoint = None
    if is_checkpoint(resolved(source)):  # an import: its weights against where they came from
        checkpoint, source = resolved(source), published_origin(resolved(source))
        if source is None:
            raise UsageError(f"{checkpoint}: not an imported checkpoint (its config records no "
                             "published model); --against transformers checks a model `fsc "
                             "import` read")
        if not is_import_source(source):
            raise UsageError(f"{checkpoint} was imported from {source}, which is not here; "
                             "--against transformers reads that published folder")
    elif not source.startswith("hf:") and not is_import_source(local_dir(source)):
        raise UsageError(f"{source}: not a published model (a folder with config.json, "
                         "published/NAME or hf:ORG/NAME) nor a checkpoint `fsc import` wrote; "
                         "--against transformers checks one of those")
    if not source.startswith("hf:") and not has_weights(local_dir(source)):
        weights = "weights (*.safetensors or pytorch_model.bin)"
        if checkpoint:
            raise UsageError(f"{checkpoint} was imported from {source}, which now has no "
                             f"{weights}; --against transformers runs transformers on them")
        raise UsageError(f"{source}: a config without {weights}; --against transformers runs "
                         f"transformers on them (`fsc verify {shlex.quote(source)}` checks its "
                         "layer plan with seeded weights)")
    recipe = import_config(source).recipe  # refusals before torch and transformers load
    ids = None if prompt_ids is None else parse_ids(prompt_ids, recipe.vocab_size, "--prompt-ids")
    torch_threads()
    from fsc.imports.reference import check

    rep = check(source, ids, seed=seed, checkpoint=checkpoint)
    if as_json:
        print_json(rep.to_dict())
    else:
        out.print(f"{rep.architecture} {printable(rep.source)} against transformers "
                  f"{rep.transformers_version}, fp32, G 1, cached: logits max relative error "
                  f"{rep.max_rel_err:.2e} (tolerance {rep.tol:.0e}); greedy {len(rep.fsc_tokens)} "
                  f"tokens {'the same' if rep.fsc_tokens == rep.reference_tokens else 'DIFFER'}",
                  markup=False, highlight=False, soft_wrap=True)  # (one line, as a log keeps it)
        from rich.text import Text

        out.print(Text("exact", style="green") if rep.exact else Text("NOT exact", style="red"))
    if not rep.exact:
        raise typer.Exit(1)


def _render(rep) -> None:
    """A VerifyReport as tables."""
    from rich.table import Table
    from rich.text import Text

    name = printable(rep.recipe)
    if rep.reduced_width:
        out.print(f"{name} has more than {MAX_FP32_WEIGHT_BYTES // 2**20} MiB of fp32 weights: "
                  f"checked the same layer plan at d_model {rep.d_model} "
                  f"({printable(rep.checked)}) with seeded weights", soft_wrap=True)
    out.print(Text(f"weights: {rep.weights}"))  # (seeded, a checkpoint's or a published model's)
    no = Text("NO", style="red")
    run = f"G {rep.G}, B {rep.B}, {rep.blocks} blocks ({rep.tokens} tokens)"
    if rep.dtype == "fp32":
        t = Table(title=f"exactness: cached vs block-causal, {run}, fp32")
        for col in ("check", "max abs err", "tolerance", "exact"):
            t.add_column(col)
        for c in rep.checks:
            t.add_row(c.what, f"{c.max_abs_err:.2e}", f"{c.tol:.1e}",
                      "yes" if c.exact else no)
    else:
        stateful = any(c.kind not in ("model", "attention") for c in rep.checks)
        states = f" (states {rep.state_dtype})" if stateful else ""  # (attention holds none)
        t = Table(title=f"drift: cached {rep.dtype}{states} vs fp32 "
                        f"block-causal, {run}; error relative to each block's largest "
                        "reference value")
        for col in ("check", "first block", "last block", "worst block", "tolerance", "ok"):
            t.add_column(col, justify="left" if col == "check" else "right")
        for c in rep.checks:
            t.add_row(c.what, f"{c.first_rel_err:.2e}", f"{c.last_rel_err:.2e}",
                      f"{c.max_rel_err:.2e}", f"{c.tol:.0e}", "yes" if c.exact else no)
    out.print(t)
    ran = ", ".join(f"{op}:{backend}" for op, backend in sorted(rep.backends.items()))
    out.print(f"kernels ran: {ran}", style="dim", markup=False, highlight=False)
    for k in rep.kernels:
        out.print(Text.assemble(f"kernel {k['op']} ({k['dtype']}): max err {k['max_err']:.2e} ",
                                "ok" if k["ok"] else ("FAIL", "red")))
    for c in rep.checks:
        if c.first_wrong is not None:
            past = "wrong" if rep.dtype == "fp32" else "past the tolerance"
            out.print(f"{c.what}: first {past} at {c.first_wrong}", style="red", markup=False,
                      highlight=False)
    verdict = ("exact", "NOT exact") if rep.dtype == "fp32" else ("within tolerance",
                                                                  "drifts past tolerance")
    out.print(verdict[0] if rep.exact else verdict[1], style="green" if rep.exact else "red")


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
