"""What a profile sweep measures, decided before any tensor exists.

The settings (`SweepConfig`), the points they expand to (`plan`), the points a resumed run
still lacks (`unmeasured`) and what the cost model says of them (`predict`). Pure Python and
arithmetic, no torch: `fsc profile` checks every option, lists a sweep (`--dry-run`) and says
how long it will roughly take before importing anything heavy.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from datetime import datetime

from fsc.blocks import block_setting
from fsc.costmodel import DeviceSpec, memory, pass_cost
from fsc.noise import overlap
from fsc.recipe import Recipe

CPU_DEFAULT_RECIPES = ["tiny_attn", "tiny_mamba", "tiny_hybrid"]
CPU_DEFAULT_S = [1024, 4096, 16384, 65536]
CPU_DEFAULT_B = [1, 4]
GPU_DEFAULT_RECIPES = ["attn_3b", "mamba_3b", "hybrid_3b"]
GPU_DEFAULT_S = [1024, 4096, 16384, 65536, 262144]
GPU_DEFAULT_B = [1, 2, 4, 8]

# One CPU core's speed, roughly, for saying how long a sweep will take before it starts (figures
# measured with torch on one core: 34 GFLOP/s fp32 and 79 bf16 in a (32, 4096) x (4096, 4096)
# matmul; random weights and caches filled at 0.13 GB/s; the reference attention reads a long
# cache at about 0.3 GB/s; eager torch costs about a millisecond per layer and pass at tiny
# shapes; a point's store write and cache set-up some tens of ms). Checked against the default
# CPU sweep (predicted 21 s, measured 21 s); good to a factor of a few, all it claims.
CPU_FLOPS = 3e10
CPU_KV_BYTES_PER_S = 3e8
CPU_FILL_BYTES_PER_S = 1.3e8
CPU_LAYER_OVERHEAD_S = 1e-3
CPU_POINT_OVERHEAD_S = 0.05


@dataclass
class SweepConfig:
    recipes: list[str]
    S: list[int]
    B: list[int]
    G: list[int] | None = None  # default: each recipe's block size
    K: list[int] | None = None  # default: K = G
    mode: str | None = None  # "diffusion" | "ar"; default: ar for recipes with block size 1
    dtype: str | None = None  # default: each recipe's dtype
    backend: str = "auto"
    warmup: int = 2
    repeats: int = 10
    device: str = "cpu"
    seed: int = 0
    memory_budget: int | None = None  # bytes a point may take in all; default: free memory
    spec: DeviceSpec | None = None  # bandwidth / peak for the floor; default: from the device

    def stored(self) -> dict:
        """The settings as the run's config records them (everything but the device figures)."""
        return {k: v for k, v in asdict(self).items() if k != "spec"}


def default_sweep(device: str) -> tuple[list[str], list[int], list[int]]:
    """(recipes, S, B) of a sweep that names none: the tiny trio on a CPU, the 3B trio on a GPU."""
    if device.startswith("cuda"):
        return GPU_DEFAULT_RECIPES, GPU_DEFAULT_S, GPU_DEFAULT_B
    return CPU_DEFAULT_RECIPES, CPU_DEFAULT_S, CPU_DEFAULT_B


@dataclass(frozen=True)
class Point:
    ref: str  # what was named: a shipped recipe, a YAML path or a checkpoint directory
    recipe: Recipe
    S: int
    B: int
    G: int
    K: int
    dtype: str

    def key(self, cfg: SweepConfig) -> tuple:
        """What identifies a stored point of a run (see Store.point_keys)."""
        return (self.recipe.recipe_hash, self.S, self.B, self.G, self.K, self.dtype, cfg.backend,
                cfg.device)


Pairs = list[tuple[int, int]]


def block_pairs(cfg: SweepConfig, recipe: Recipe) -> tuple[Pairs, Pairs]:
    """(kept, left out): the (G, K) pairs of a recipe, each checked by the one rule of
    fsc.blocks. The --G and --steps lists are crossed (default: the recipe's block size, K = G);
    autoregressive points are (1, 0). In a cross, a pair with K > G is no decoding setting and
    is left out; a recipe that keeps no pair is an error."""
    crossed = len(cfg.G or [None]) * len(cfg.K or [None]) > 1
    kept, left_out = [], []
    for G in cfg.G or [None]:
        for K in cfg.K or [None]:
            g = recipe.block_size if G is None else G
            if crossed and cfg.mode != "ar" and K is not None and K > g:
                left_out.append((g, K))
                continue
            kept.append(block_setting(cfg.mode, G, K, recipe.block_size)[1:])
    if not kept:
        block_setting(cfg.mode, *left_out[0], recipe.block_size)  # raises the rule's own message
    return kept, left_out


def plan(cfg: SweepConfig, recipes: dict[str, Recipe]) -> tuple[list[Point], dict[str, list]]:
    """Every point of the sweep in the order it runs (recipe, B, S, then (G, K)), and the (G, K)
    pairs left out per recipe name. UsageError (from fsc.blocks) on a setting no point may use."""
    points, left_out = [], {}
    for ref in cfg.recipes:
        recipe = recipes[ref]
        pairs, dropped = block_pairs(cfg, recipe)
        if dropped:
            left_out[recipe.name] = dropped
        dtype = cfg.dtype or recipe.dtype
        points += [Point(ref, recipe, S, B, G, K, dtype)
                   for B in cfg.B for S in cfg.S for G, K in pairs]
    return points, left_out


def unmeasured(points: list[Point], stored: dict[tuple, int], cfg: SweepConfig) -> list[Point]:
    """The points a resumed run still lacks: each stored point (`stored` counts them by key)
    accounts for one planned point with its key, so a sweep that repeats a point resumes
    with the right number of repeats."""
    left = dict(stored)
    todo = []
    for p in points:
        k = p.key(cfg)
        if left.get(k, 0) > 0:
            left[k] -= 1
        else:
            todo.append(p)
    return todo


def predict(p: Point, budget: int) -> dict:
    """The cost model on one point: the bytes it needs in all (weights, cache with room for
    S + G, one pass's activations) and whether that fits in `budget` bytes."""
    need = memory(p.recipe.with_dtype(p.dtype), p.S, p.B, p.G)["total_bytes"]
    return {"predicted_total_bytes": need, "fits": need <= budget}


def rough_cpu_seconds(points: list[Point], cfg: SweepConfig, budget: int) -> list[float]:
    """Roughly how long each point takes on one CPU core (see the CPU_* figures): a synthetic
    cache, then warm-up and timed steps and folds; the first point of each recipe also builds
    its model. A point that does not fit in `budget` bytes is only recorded as such."""
    passes = 2 * (cfg.warmup + cfg.repeats)
    seconds, built = [], set()
    for p in points:
        ran_as = p.recipe.with_dtype(p.dtype)
        mem = memory(ran_as, p.S, p.B, p.G)
        if mem["total_bytes"] > budget:
            seconds.append(CPU_POINT_OVERHEAD_S)
            continue
        cost = pass_cost(ran_as, p.S, p.B, p.G)
        per_pass = (p.recipe.n_layers * CPU_LAYER_OVERHEAD_S + cost.flops / CPU_FLOPS
                    + cost.kv_read_bytes / CPU_KV_BYTES_PER_S)
        fill = mem["cache_capacity_bytes"] + (0 if p.ref in built else mem["weight_bytes"])
        built.add(p.ref)
        seconds.append(passes * per_pass + fill / CPU_FILL_BYTES_PER_S + CPU_POINT_OVERHEAD_S)
    return seconds


# -- results ---------------------------------------------------------------------------------
@dataclass
class PointResult:
    """One point of a sweep as measured, or refused (status oom or error, with why): the
    columns of its profile_points row, then its raw timings and, after an error, the traceback
    (neither of those two is a column). Times in ms, sizes in bytes, bandwidth in GB/s."""

    recipe: str
    recipe_hash: str
    layer_plan: list[str]
    S: int
    B: int
    G: int
    K: int
    dtype: str
    backend: str
    device: str
    status: str = "ok"
    error: str | None = None
    step_ms: float | None = None
    step_ms_p10: float | None = None
    step_ms_p90: float | None = None
    fold_ms: float | None = None
    fold_ms_p10: float | None = None
    fold_ms_p90: float | None = None
    tokens_per_s: float | None = None
    peak_bytes: int | None = None
    mixer_backends: dict[str, str] | None = None  # mixer kind -> the backend its ops ran on
    cache_bytes: int | None = None
    weight_bytes: int | None = None
    predicted_step_bytes: int | None = None
    predicted_total_bytes: int | None = None
    floor_ms: float | None = None
    bound: str | None = None
    achieved_gbps: float | None = None
    roofline_fraction: float | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    samples: dict[str, list[float]] | None = field(default=None, repr=False)
    traceback: str | None = field(default=None, repr=False)

    def key(self) -> tuple:
        """The stored point's key: what Point.key gives for the point it measured."""
        return (self.recipe_hash, self.S, self.B, self.G, self.K, self.dtype, self.backend,
                self.device)

    def columns(self) -> dict:
        """The profile_points columns (what the store and `--json` get)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("samples", "traceback")}


def _baseline(rows: list[PointResult]) -> str:
    """The recipe others are compared with: the all-attention one if any, else the first."""
    for r in rows:
        if set(r.layer_plan) == {"attention"}:
            return r.recipe
    return rows[0].recipe


def compare(rows: list[PointResult], baseline: str | None = None) -> list[dict]:
    """At each (S, B, G, K): latency ×, memory × and throughput × of every recipe versus the
    baseline recipe (default: the all-attention one, else the first; × > 1: better than the
    baseline). `latency_noise` / `throughput_noise`: the p10–p90 intervals of the step (and,
    for throughput, the fold) overlap, so the ratio is inside the noise."""
    if not rows:
        return []
    base_name = baseline or _baseline(rows)

    def key(r):
        return r.S, r.B, r.G, r.K

    by = {(r.recipe, *key(r)): r for r in rows}
    result = []
    for r in rows:
        if r.recipe == base_name or r.status != "ok":
            continue
        base = by.get((base_name, *key(r)))
        ok = base is not None and base.status == "ok"
        result.append({
            "S": r.S, "B": r.B, "G": r.G, "K": r.K, "recipe": r.recipe,
            "baseline": base_name,
            "latency_x": base.step_ms / r.step_ms if ok else None,
            "memory_x": base.peak_bytes / r.peak_bytes if ok else None,
            "throughput_x": r.tokens_per_s / base.tokens_per_s if ok else None,
            "baseline_status": base.status if base else "-",
            "latency_noise": ok and overlap(base, r),
            "throughput_noise": ok and overlap(base, r) and overlap(base, r, "fold"),
        })
    return sorted(result, key=lambda c: (c["G"], c["K"], c["B"], c["S"], c["recipe"]))
