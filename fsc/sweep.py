"""What a profile sweep measures, decided before any tensor exists.

The settings (`SweepConfig`), the sweep a command asks for, checked (`request`), the points
it expands to (`plan`), what a resumed run must find unchanged (`unchanged`) and still lacks
(`unmeasured`), and what the cost model says of the points (`predict`). Pure Python and
arithmetic, no torch: `fsc profile` checks every option, lists a sweep (`--dry-run`) and says
how long it will roughly take before importing anything heavy.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

from fsc.blocks import CPU_DEFAULT_B, CPU_DEFAULT_S, GPU_DEFAULT_B, GPU_DEFAULT_S, block_setting
from fsc.costmodel import DeviceSpec, memory, pass_cost
from fsc.errors import UsageError
from fsc.kernels import TUNING_ENV
from fsc.recipe import Recipe
from fsc.source import load_source_recipe
from fsc.text import printable

if TYPE_CHECKING:
    from fsc.store import Store

CPU_DEFAULT_RECIPES = ["tiny_attn", "tiny_mamba", "tiny_hybrid"]
GPU_DEFAULT_RECIPES = ["attn_3b", "mamba_3b", "hybrid_3b"]

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
                device_key(cfg.device))


def device_key(device: str) -> str:
    """A point's device as its key names it: `cuda`, what a run measured in the `fsc` process
    records, is `cuda:0`, what a worker records of the one GPU it sees, so that a run resumed
    under another executor finds the points it holds."""
    return "cuda:0" if device == "cuda" else device


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
    else:
        check_names(loaded)
    if loaded:  # a bad (mode, G, K) fails here, not after torch is imported
        plan(cfg, loaded)
    elif cfg.mode == "ar":  # the default recipes wait for the device; ar's rule needs none
        block_setting("ar", (cfg.G or [None])[0], (cfg.K or [None])[0])
    return SweepRequest(cfg, loaded, bandwidth, resume)


def check_names(recipes: dict[str, Recipe]) -> None:
    """UsageError where two different recipes (`recipes`: as named -> loaded; another content
    hash) carry one name: their rows, and the baseline that is picked by name, could not be
    told apart."""
    seen: dict[str, tuple[str, Recipe]] = {}
    for ref, recipe in recipes.items():
        other, first = seen.setdefault(recipe.name, (ref, recipe))
        if first.recipe_hash != recipe.recipe_hash:
            raise UsageError(
                f"-r {shlex.quote(printable(other))} and -r {shlex.quote(printable(ref))}"
                f" are different recipes both named {printable(recipe.name, 80)}: their rows "
                "could not be told apart; give one of them another name (its `name:`)")


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


def stored_keys(stored: dict[tuple, int]) -> dict[tuple, int]:
    """Stored points counted by key (Store.point_keys), each device as `device_key` names it."""
    keyed: dict[tuple, int] = {}
    for k, n in stored.items():
        k = (*k[:-1], device_key(k[-1]))
        keyed[k] = keyed.get(k, 0) + n
    return keyed


def unmeasured(points: list[Point], stored: dict[tuple, int], cfg: SweepConfig) -> list[Point]:
    """The points a resumed run still lacks: each stored point (`stored` counts them by key)
    accounts for one planned point with its key, so a sweep that repeats a point resumes
    with the right number of repeats."""
    left = stored_keys(stored)
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
    its model, unless its weights alone exceed `budget` bytes (as the sweep does, whether or
    not any of its points fits). A point that does not fit is only recorded as such."""
    passes = 2 * (cfg.warmup + cfg.repeats)
    seconds, built = [], set()
    for p in points:
        ran_as = p.recipe.with_dtype(p.dtype)
        mem = memory(ran_as, p.S, p.B, p.G)
        build = 0.0
        if p.ref not in built and mem.weight_bytes <= budget:
            build = mem.weight_bytes / CPU_FILL_BYTES_PER_S
        built.add(p.ref)
        if mem.total_bytes > budget:
            seconds.append(build + CPU_POINT_OVERHEAD_S)
            continue
        cost = pass_cost(ran_as, p.S, p.B, p.G)
        per_pass = (p.recipe.n_layers * CPU_LAYER_OVERHEAD_S + cost.flops / CPU_FLOPS
                    + cost.kv_read_bytes / CPU_KV_BYTES_PER_S)
        seconds.append(passes * per_pass + mem.cache_capacity_bytes / CPU_FILL_BYTES_PER_S
                       + build + CPU_POINT_OVERHEAD_S)
    return seconds
