"""What a profile sweep measures, decided before any tensor exists.

The settings (`SweepConfig`), the sweep a command asks for, checked (`request`), the points
it expands to (`plan`), what a resumed run must find unchanged (`unchanged`) and still lacks
(`unmeasured`), and what the cost model says of the points (`predict`). Pure Python and
arithmetic, no torch: `fsc profile` checks every option, lists a sweep (`--dry-run`) and says
how long it will roughly take before importing anything heavy.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING

from fsc.blocks import block_setting
from fsc.costmodel import DeviceSpec, memory, pass_cost
from fsc.errors import UsageError
from fsc.kernels import TUNING_ENV
from fsc.noise import overlap
from fsc.recipe import Recipe
from fsc.source import load_source_recipe
from fsc.text import printable

if TYPE_CHECKING:
    from fsc.store import Store

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
    graphs: bool = True  # on CUDA, time the step and the fold replayed from CUDA graphs
    spec: DeviceSpec | None = None  # bandwidth / peak for the floor; default: from the device

    def stored(self) -> dict:
        """The settings as the run's config records them (everything but the device figures)."""
        return {k: v for k, v in asdict(self).items() if k != "spec"}


def timed_with_graphs(config: dict) -> bool:
    """Whether a stored profile run times its GPU steps replayed from CUDA graphs: as its
    config says; a run recorded before `graphs` existed issued them eagerly."""
    return bool(config.get("graphs", False))


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


@dataclass
class SweepRequest:
    """A sweep as a command asked for it, checked: its settings, the recipes it names (loaded;
    the default ones wait for the device), the bandwidth its floor uses (TB/s; None: the device
    table's), and the run it continues (None: a new one)."""

    cfg: SweepConfig
    recipes: dict[str, Recipe]
    bandwidth: float | None = None
    resume: str | None = None


def request(st: Store, cfg: SweepConfig | None, bandwidth: float | None = None,
            resume: str | None = None) -> SweepRequest:
    """The sweep `cfg` asks for or, with `resume`, the one run `resume` in `st` recorded (its
    settings and bandwidth; UsageError unless it may be resumed and finds its recipes and
    kernel settings unchanged). Every recipe is loaded and every (mode, G, K) checked here,
    without torch, so a mistake costs one line before anything heavy is imported."""
    config = None
    if resume is not None:
        config = st.run_config(resume)
        config["graphs"] = timed_with_graphs(config)
        cfg = SweepConfig(**{f.name: config[f.name] for f in fields(SweepConfig)
                             if f.name in config})
        bandwidth = config.get("bandwidth")
    loaded = {r: load_source_recipe(r) for r in cfg.recipes}
    if config is not None:
        check_unchanged(resume, config, loaded)
    if loaded:  # a bad (mode, G, K) fails here, not after torch is imported
        plan(cfg, loaded)
    elif cfg.mode == "ar":  # the default recipes wait for the device; ar's rule needs none
        block_setting("ar", (cfg.G or [None])[0], (cfg.K or [None])[0])
    return SweepRequest(cfg, loaded, bandwidth, resume)


def unchanged(cfg: SweepConfig, recipes: dict[str, Recipe]) -> dict:
    """What a resumed run must find as it was, in the run's config: each recipe's content
    hash and the kernels' launch choices ($FSC_KERNEL_TUNING)."""
    return {"kernel_tuning": os.environ.get(TUNING_ENV) or None,
            "recipe_hashes": {ref: recipes[ref].recipe_hash for ref in cfg.recipes}}


def check_unchanged(run_id: str, config: dict, recipes: dict[str, Recipe]) -> None:
    """UsageError unless resumed run `run_id` (its stored `config`) measures what it measured
    before: the same recipes (`recipes`: loaded now) and kernel settings."""
    for ref, recipe_hash in (config.get("recipe_hashes") or {}).items():
        now = recipes[ref].recipe_hash
        if now != recipe_hash:
            raise UsageError(f"--resume {run_id}: recipe {printable(ref, 80)} changed since the "
                             f"run began (hash {recipe_hash[:12]}, now {now[:12]})")
    tuning = os.environ.get(TUNING_ENV) or None
    if tuning != config.get("kernel_tuning"):
        raise UsageError(f"--resume {run_id}: the run measured with {TUNING_ENV}="
                         f"{printable(config.get('kernel_tuning') or '', 80)!r}; set it the same")


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
    need = memory(p.recipe.with_dtype(p.dtype), p.S, p.B, p.G).total_bytes
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
        if mem.total_bytes > budget:
            seconds.append(CPU_POINT_OVERHEAD_S)
            continue
        cost = pass_cost(ran_as, p.S, p.B, p.G)
        per_pass = (p.recipe.n_layers * CPU_LAYER_OVERHEAD_S + cost.flops / CPU_FLOPS
                    + cost.kv_read_bytes / CPU_KV_BYTES_PER_S)
        fill = mem.cache_capacity_bytes + (0 if p.ref in built else mem.weight_bytes)
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
        """The point's profile_points row: what the store writes (it keeps mixer_backends as
        JSON text), `--json` prints and a worker sends (with samples and traceback)."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("samples", "traceback")}

    @classmethod
    def from_columns(cls, row: dict) -> PointResult:
        """The point a row of profile_points columns describes: a stored row (mixer_backends as
        JSON text) or a worker's (times as ISO text after a JSON-lines file); keys that are not
        fields are left out."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in row.items() if k in names}
        if isinstance(values.get("mixer_backends"), str):
            values["mixer_backends"] = json.loads(values["mixer_backends"])
        for k in ("started_at", "ended_at"):
            if isinstance(values.get(k), str):
                values[k] = datetime.fromisoformat(values[k])
        return cls(**values)


def _baseline(rows: list[PointResult]) -> str:
    """The recipe others are compared with: the all-attention one if any, else the first."""
    for r in rows:
        if set(r.layer_plan) == {"attention"}:
            return r.recipe
    return rows[0].recipe


def compare(rows: list[PointResult], baseline: str | None = None,
            memory_budget: int | None = None, free_bytes: int | None = None) -> list[dict]:
    """At each (S, B, G, K): latency ×, memory × and throughput × of every recipe versus the
    baseline recipe (default: the all-attention one, else the first; × > 1: better than the
    baseline). `latency_noise` / `throughput_noise`: the p10–p90 intervals of the measure the
    ratio names overlap (the step's; the block's per token, K·step + fold over B·G, which
    tokens/s inverts), so the ratio is inside the noise.

    Where the baseline is out of memory at (S, B), the recipe is compared with the baseline's
    largest batch measured at that S (and G, K) that fits: `baseline_B` is the batch compared
    with (B itself, unless so). Where the sweep measured none, `baseline_fits_B` is the largest
    batch the cost model fits in the budget (`memory_budget`, the sweep's --memory-budget,
    else `free_bytes`; None when neither is known; 0: not even one sequence) and
    `baseline_command` the `fsc profile` that measures it."""
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
        fits_B = command = None
        if base is not None and base.status == "oom":
            same_s = [b for b in rows
                      if b.recipe == base_name and (b.S, b.G, b.K) == (r.S, r.G, r.K)]
            smaller = [b for b in same_s if b.status == "ok" and b.B < r.B]
            if smaller:
                base = max(smaller, key=lambda b: b.B)
            else:
                fits_B = _batch_that_fits(base, memory_budget or free_bytes,
                                          min(b.B for b in same_s if b.status == "oom"))
                if fits_B:
                    command = _profile_command(base, fits_B, memory_budget)
        ok = base is not None and base.status == "ok"
        result.append({
            "S": r.S, "B": r.B, "G": r.G, "K": r.K, "recipe": r.recipe,
            "baseline": base_name,
            "baseline_B": base.B if ok else None,
            "latency_x": base.step_ms / r.step_ms if ok else None,
            "memory_x": base.peak_bytes / r.peak_bytes if ok else None,
            "throughput_x": r.tokens_per_s / base.tokens_per_s if ok else None,
            "baseline_status": base.status if base else "-",
            "baseline_fits_B": fits_B,
            "baseline_command": command,
            "latency_noise": ok and overlap(base, r) is True,
            "throughput_noise": ok and overlap(base, r, "token") is True,
        })
    return sorted(result, key=lambda c: (c["G"], c["K"], c["B"], c["S"], c["recipe"]))


def _batch_that_fits(oom: PointResult, budget: int | None, oom_from: int) -> int | None:
    """The largest B below `oom_from` (the smallest batch measured out of memory) at which the
    cost model fits `oom`'s recipe at its S and G in `budget` bytes (0: none; None: no budget
    or no prediction). A point's bytes are the weights plus a part per sequence (see
    costmodel.max_batch), which the oom row's predicted total at its B gives."""
    if budget is None or not oom.predicted_total_bytes or oom.weight_bytes is None:
        return None
    per_sequence = (oom.predicted_total_bytes - oom.weight_bytes) / oom.B
    if per_sequence <= 0:
        return None
    return max(0, min(int((budget - oom.weight_bytes) // per_sequence), oom_from - 1))


def _profile_command(p: PointResult, B: int, memory_budget: int | None) -> str:
    """The `fsc profile` that measures point `p`'s recipe at its S, G and K at batch `B`."""
    block = "--mode ar" if p.K == 0 else f"--G {p.G} --steps {p.K}"
    budget = f" --memory-budget {_size_option(memory_budget)}" if memory_budget else ""
    return f"fsc profile -r {shlex.quote(p.recipe)} --S {p.S} --B {B} {block}{budget}"


def _size_option(n: int) -> str:
    """Bytes as --memory-budget reads them back exactly: '24MiB', '3GiB', '1000000'."""
    for name, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n % size == 0:
            return f"{n // size}{name}"
    return str(n)


def baseline_notes(comparison: list[dict]) -> list[str]:
    """What a versus-baseline table says below it: for each S (and G, K) where the baseline is
    out of memory and the sweep measured no batch of it that fits, the batch the cost model
    fits and the command that measures it."""
    notes: list[str] = []
    said = set()
    for x in comparison:
        where = (x["S"], x["G"], x["K"])
        if x["baseline_status"] != "oom" or x["baseline_B"] is not None or where in said:
            continue
        said.add(where)
        base = x["baseline"]
        at = (f"{base} is out of memory at S {x['S']}, B {x['B']} and the sweep measured no "
              "smaller batch of it that fits")
        if x["baseline_command"]:
            notes.append(f"{at}; per the cost model it fits at B {x['baseline_fits_B']}, which "
                         f"this measures: `{x['baseline_command']}`")
        elif x["baseline_fits_B"] == 0:
            notes.append(f"{at}; the cost model fits not even B 1 at S {x['S']}")
        else:
            notes.append(f"{at}; measure it at a smaller --B to compare")
    return notes
