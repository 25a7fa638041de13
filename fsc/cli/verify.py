"""`fsc verify`: cached versus uncached block-causal forward, per mixer kind, in fp32."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fsc.cli.common import BackendOpt, JsonOpt, out, print_json, torch_device, torch_threads


def verify(
    source: Annotated[str, typer.Argument(help="Recipe file, shipped recipe name or checkpoint dir.")],
    G: Annotated[int | None, typer.Option("--G", help="Block size to check (must be > 1).")] = None,
    B: Annotated[int, typer.Option("--B", help="Batch.")] = 2,
    blocks: Annotated[int, typer.Option("--blocks", help="Blocks decoded.")] = 3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of weights and inputs.")] = 0,
    backend: BackendOpt = "auto",
    device: Annotated[str, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")] = "cpu",
    as_json: JsonOpt = False,
) -> None:
    """Check exactness on this machine; exits 1 when the cached path is not exact."""
    from fsc import ops
    from fsc.errors import UsageError
    from fsc.source import is_checkpoint, load_source_recipe
    from fsc.verify import verify as run_verify

    if G is not None and G < 2:
        raise UsageError(f"--G {G}: the exactness check needs G > 1")
    if B < 1 or blocks < 2:
        raise UsageError("need --B >= 1 and --blocks >= 2")
    ops.use_backend(backend)
    torch_threads()
    device = torch_device(device)
    report = run_verify(load_source_recipe(source), G=G, B=B, n_blocks=blocks, seed=seed, device=device,
                        checkpoint=Path(source) if is_checkpoint(source) else None)
    report["backends"] = dict(ops.ran)
    if backend == "triton":
        from fsc.kernels.selfcheck import check_kernels

        report["kernels"] = check_kernels(device)
        report["exact"] = report["exact"] and all(k["ok"] for k in report["kernels"])
    if as_json:
        print_json(report)
    else:
        _render(report)
    if not report["exact"]:
        raise typer.Exit(1)


def _render(rep: dict) -> None:
    from rich.table import Table

    if rep["reduced_width"]:
        out.print(f"{rep['recipe']} is too large for this machine: checked the same layer plan "
                  f"at d_model {rep['d_model']} ({rep['checked']})")
    t = Table(title=f"exactness: cached vs block-causal, G {rep['G']}, B {rep['B']}, "
                    f"{rep['blocks']} blocks, fp32")
    for col in ("check", "max abs err", "tolerance", "exact"):
        t.add_column(col)
    for c in rep["checks"]:
        t.add_row(c["what"], f"{c['max_abs_err']:.2e}", f"{c['tol']:.1e}", "yes" if c["exact"] else "[red]NO")
    out.print(t)
    for k in rep.get("kernels", []):
        out.print(f"kernel {k['op']} ({k['dtype']}): max err {k['max_err']:.2e} "
                  f"{'ok' if k['ok'] else '[red]FAIL'}")
    out.print("[green]exact[/]" if rep["exact"] else "[red]NOT exact[/]")


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
