"""`fsc estimate`: the cost model's memory, bytes moved, FLOPs and floor time for one point."""

from __future__ import annotations

import math
from typing import Annotated

import typer
from rich.text import Text

from fsc.blocks import MAX_G
from fsc.cli.bounds import GB, MAX_B, MAX_S, TB_S, TFLOPS, point, size
from fsc.cli.common import JsonOpt, Mode, finite, fmt_bytes, fmt_count, out, print_json, printable

RecipeArg = Annotated[
    str, typer.Argument(metavar="RECIPE", help="Recipe YAML path, shipped recipe name (see `fsc recipes`), checkpoint dir, or a published model: a folder with config.json, published/NAME or hf:ORG/NAME[@REV].")
]
# S, B, G and K take one value each (one point); `fsc profile` sweeps lists of them. G and K
# are bounded by fsc.blocks.block_setting, in the words decode and profile use.
_SWEEP = "fsc estimate predicts one point; `fsc profile --dry-run` lists several"


def _one(kind: type, option: str, default: int | None, help: str, check=None):
    return point(kind, option, default, help, _SWEEP, check)


SOpt = _one(str, "--S", 8192, "Context length S: tokens already in the cache, e.g. 262144 or "
            f"256k (at most {MAX_S}; default 8192).", size(0, MAX_S, "--S"))
BOpt = _one(str, "--B", 1, f"Batch B: sequences decoded together (1 to {MAX_B}; default 1).",
            size(1, MAX_B, "--B"))
GOpt = _one(str, "--G", None, f"Block size G, 1 to {MAX_G} (default: the recipe's "
            "block_size; 1 in ar mode).", size(1, MAX_G, "--G"))
StepsOpt = _one(str, "--steps", None, "Denoising steps K per block, 1..G (default: G). ar mode "
                "takes none.", size(1, MAX_G, "--steps"))
ModeOpt = Annotated[
    Mode | None,
    typer.Option("--mode", help="diffusion (K steps + one fold per block) or ar (one forward "
                 "per token, which folds it). Default: ar for a G = 1 recipe (every published "
                 "model) unless --G is given, else diffusion.", show_default=False),
]
GpuOpt = Annotated[
    str,
    typer.Option("--gpu", help="Device: h100, h200, a100 or a CUDA device name; another name "
                 "needs --bandwidth, --tflops and --memory."),
]
BandwidthOpt = Annotated[
    float | None,
    typer.Option("--bandwidth", callback=finite(*TB_S), show_default=False,
                 help=f"Override the memory bandwidth, in TB/s (1e12 bytes/s; {TB_S[0]:g} to "
                 f"{TB_S[1]:g})."),
]
TflopsOpt = Annotated[
    float | None,
    typer.Option("--tflops", callback=finite(*TFLOPS), show_default=False,
                 help=f"Override the dense matrix peak, in TFLOP/s ({TFLOPS[0]:g} to "
                 f"{TFLOPS[1]:g})."),
]
MemoryOpt = Annotated[
    float | None,
    typer.Option("--memory", callback=finite(*GB), show_default=False,
                 help=f"Override the device memory, in GB (1e9 bytes; {GB[0]:g} to {GB[1]:g})."),
]


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e7 else f"{n / 1e9:.3g} GB"


def _num(v: float, digits: int = 3) -> str:
    """`digits` decimals, or three significant figures where those would print a small value
    as zero (a tiny recipe's floor is microseconds)."""
    return f"{v:,.{digits}f}" if v == 0 or abs(v) >= 10 ** (1 - digits) else f"{v:.3g}"


def _below(what: str, x: float) -> str:
    """`what` for the whole K below the crossover x (K <= ceil(x) - 1, so that a crossover
    of 7.05 is not read as 'K < 7.0'), with x itself where it is not whole (to six decimals
    where two would round it onto a whole K: 2.999988, not 3.00); or for no K where no K >= 1
    is below x."""
    k = math.ceil(x) - 1
    if k < 1:
        return f"{what} for no K >= 1"
    if x == int(x):
        return f"{what} for K <= {k}"
    at = f"{x:.2f}"
    if float(at) in (k, k + 1):  # rounded onto a whole K, it would hide which side x is on
        whole = math.floor if float(at) == k + 1 else math.ceil
        at = f"{whole(x * 1e6) / 1e6:.6f}".rstrip("0")
    return f"{what} for K <= {k} (break-even at K = {at})"


def _share(total: int, memory: int) -> str:
    """total / memory as a whole percentage that never reads 100 % for a point that does
    not fit, or for one that fits with room, nor 0 % for a point that needs memory."""
    pct = 100 * total / memory
    if total > memory and pct < 100.5:
        return ">100%"
    if total < memory and pct >= 99.5:
        return "<100%"
    return "<1%" if 0 < pct < 0.5 else f"{pct:,.0f}%"


def _rate(v: float) -> str:
    """Tokens/s to one decimal, or three significant figures where that would print 0.0."""
    return f"{v:,.1f}" if v >= 0.05 else f"{v:.3g}"


def _render(e) -> None:
    from rich.table import Table

    d, r, spec = e.to_dict(), e.recipe, e.device
    out.print(Text.assemble(
        (printable(r.name), "bold"), f"  {e.mode}  S = {e.S:,}  B = {e.B}  G = {e.G}  "
        + (f"K = {e.K}  " if e.mode == "diffusion" else "") + f"on {printable(spec.name)} ({_gb(spec.memory_bytes)}, "
        f"{spec.bandwidth_bytes_per_s / 1e12:g} TB/s, {spec.peak_flops / 1e12:g} TFLOP/s)"))
    growing, fixed = _cache_kinds(r)
    mem = Table(title="Memory (sizes in binary units; device memory in GB = 1e9 bytes)")
    for col in ("", "size", "note"):
        mem.add_column(col, justify="right" if col == "size" else "left")
    parts = ", ".join(f"{k} {fmt_count(v)}" for k, v in d["params"].items() if k != "total")
    mem.add_row("parameters", fmt_count(d["param_count"]), parts)
    mem.add_row("weights", fmt_bytes(d["weight_bytes"]), f"{r.dtype}, resident")
    mem.add_row("KV cache at S", fmt_bytes(d["kv_bytes"]),
                f"{growing}, grows with S and B" if growing else "no layer's cache grows with S")
    mem.add_row("state", fmt_bytes(d["state_bytes"]), f"{fixed}; fixed size" if fixed else "none")
    mem.add_row("cache, room for S + G", fmt_bytes(d["cache_capacity_bytes"]), "what is allocated")
    mem.add_row("activations", fmt_bytes(d["activation_bytes"]), "estimate, fused kernels")
    mem.add_row("total", fmt_bytes(d["total_bytes"]),
                f"{_share(d['total_bytes'], spec.memory_bytes)} of the device's "
                f"{fmt_bytes(spec.memory_bytes)} ({_gb(spec.memory_bytes)})")
    mem.add_row("fits", "yes" if d["fits"] else "NO", "")
    mem.add_row("max batch at this S", f"{d['max_batch']:,}",
                f"memory's bound; fsc's --B is at most {MAX_B:,}" if d["max_batch"] > MAX_B else "")
    oom = d["oom_context"]
    if oom == 0:  # nothing fits, whatever S: say what does not
        mem.add_row("memory runs out", "already", "the weights alone do not fit"
                    if d["weight_bytes"] > spec.memory_bytes else
                    f"weights, {'state' if fixed else 'the cache of one block'} and "
                    f"activations do not fit at B = {e.B}, even at S 0")
    else:
        mem.add_row("memory runs out at S", "never" if oom is None else f"{oom:,}",
                    "no growing cache" if oom is None else f"at B = {e.B}" + (
                        f"; fsc's --S is at most {MAX_S:,}" if oom > MAX_S else ""))
    out.print(mem)

    passes = Table(title="Per pass at the roofline floor")
    for col in ("pass", "bytes moved", "GFLOP", "FLOP/byte", "floor ms", "bound"):
        passes.add_column(col, justify="left" if col == "pass" else "right")
    rows = [("step (= fold)", e.fold)] if e.mode == "ar" else [("step", e.step), ("fold", e.fold)]
    for name, p in rows:  # (ar: one pass a token, the fold; one row)
        t, bound = p.floor(spec)
        passes.add_row(name, fmt_bytes(p.bytes), _num(p.flops / 1e9, 1),
                       f"{p.flops / p.bytes:.1f}", _num(t * 1e3), bound)
    out.print(passes)
    per = "token: t_fold" if e.mode == "ar" else f"block: {e.K}·t_step + t_fold"
    out.print(f"time per {per} = {_num(d['block_ms'])} ms; tokens/s at the floor = "
              f"{'B' if e.mode == 'ar' else 'B·G'} / that = {_rate(d['tokens_per_s'])}")

    c = d["comparison"]
    if c is None:  # G = 1: block diffusion at G 1 is ar with a masked step added
        out.print("G = 1: no block-diffusion comparison; give --G N (N > 1) for one"
                  + (", without --mode ar (the recipe's block size is 1)"
                     if e.mode == "ar" else ""))
        _moe(d["moe"])
        return
    cmp = Table(title="Autoregressive vs block diffusion (same S, B, device)")
    for col in ("decoding", "weight sweeps per token", "tokens/s at the floor"):
        cmp.add_column(col, justify="left" if col == "decoding" else "right")
    cmp.add_row("ar (G = 1)", _num(c["ar_weight_sweeps_per_token"]),
                _rate(c["ar_tokens_per_s"]))
    cmp.add_row(f"diffusion (G = {c['diffusion_G']}, K = {c['diffusion_K']})",
                _num(c["diffusion_weight_sweeps_per_token"]),
                _rate(c["diffusion_tokens_per_s"]))
    out.print(cmp)
    out.print(_below("diffusion sweeps the weights less often than ar",
                     c["sweep_crossover_steps"]) + "; "
              + _below("its floor is faster than ar's", c["floor_crossover_steps"]))

    _moe(d["moe"])


def _cache_kinds(r) -> tuple[str, str]:
    """The layers whose cache grows with S and those of a fixed size, each kind with its
    count and the dtype its cache is held in (a mixer may fix its own: linear attention's
    sums are fp32; a sliding window's ring is fixed in size)."""
    from fsc.costmodel.shapes import cache_dtype, kind_shapes

    growing, fixed = [], []
    for shape, n in kind_shapes(r):
        if not shape.cache:
            continue
        window = "" if shape.window is None else f"window {shape.window:,}, "
        what = f"{n} {shape.kind} ({window}{cache_dtype(r, shape)})"
        (growing if shape.growing else fixed).append(what)
    return ", ".join(growing), ", ".join(fixed)


def _moe(moe) -> None:
    if moe is not None:
        out.print(f"MoE: {moe['n_experts']} experts, top {moe['top_k']}: resident "
                  f"{fmt_bytes(moe['resident_bytes'])}, read per step "
                  f"{fmt_bytes(moe['read_bytes_per_step'])} ({moe['experts_read_per_layer']} "
                  f"experts per layer at most); {fmt_count(moe['active_params_per_token'])} "
                  "parameters active per token")


def estimate_cmd(
    recipe: RecipeArg,
    S: SOpt = None,
    B: BOpt = None,
    G: GOpt = None,
    steps: StepsOpt = None,
    mode: ModeOpt = None,
    gpu: GpuOpt = "h100",
    bandwidth: BandwidthOpt = None,
    tflops: TflopsOpt = None,
    memory: MemoryOpt = None,
    json: JsonOpt = False,
) -> None:
    """Predict memory, bytes moved, FLOPs, floor time and tokens/s for one decoding point.

    Pure arithmetic from the recipe (no model is built): weights, KV cache and fixed states,
    whether the point fits, the largest batch and context that fit, and autoregressive versus
    block-diffusion decoding at the roofline floor.
    """
    from fsc.blocks import block_setting
    from fsc.costmodel import estimate
    from fsc.errors import UsageError
    from fsc.source import load_source_recipe, resolved

    (S,), (B,), (G,), (steps,) = S, B, G, steps  # one value each (see one_value)
    if S > MAX_S:  # (a negative S is the cost model's to refuse)
        raise UsageError(f"--S {S} must be at most {MAX_S}")
    r = load_source_recipe(resolved(recipe))  # a training directory: its newest step
    # the rule decode and profile apply: a G = 1 recipe decodes autoregressively
    mode_, _, _ = block_setting(mode and str(mode), G, steps, r.block_size)
    e = estimate(r, S, B, G, steps, mode_, gpu,
                 bandwidth_tb_s=bandwidth, tflops=tflops, memory_gb=memory)
    if json:
        print_json(e.to_dict())
    else:
        _render(e)


def register(app: typer.Typer) -> None:
    app.command("estimate")(estimate_cmd)
