"""The profiler: a sweep of recipes × S × B, each point timed on a synthetic cache.

The points come from fsc.sweep (torch-free). Per point: ask the cost model whether weights,
cache and activations fit (`check_fits`, the rule every command uses; else an 'oom' row), build a
synthetic cache that looks like S finished tokens, warm up, then time `step` (the frontier block
against the cache, cache unchanged) and `fold` (the block written into the cache, rewound after
each repeat) with CUDA events on a GPU or a monotonic clock on the CPU. Every point becomes one
store row as soon as it finishes, so a killed sweep keeps what it measured.
"""

from __future__ import annotations

import statistics
import time
import traceback
from dataclasses import replace
from datetime import UTC, datetime

import torch

from fsc import graphs, ops
from fsc.costmodel import DeviceSpec, cache_bytes, device_spec, memory, pass_cost, predict_point
from fsc.errors import WeightsDoNotFit, is_out_of_memory
from fsc.loading import check_fits, free_bytes, load_model
from fsc.mixers import MIXERS
from fsc.model.layers import TORCH_DTYPES
from fsc.recipe import Recipe
from fsc.source import load_source_recipe
from fsc.sweep import Point, SweepConfig
from fsc.sweep_results import PointResult


def _now() -> datetime:
    return datetime.now(UTC)


def _percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    i = (len(s) - 1) * q
    lo, hi = int(i), min(int(i) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


class Timer:
    """CUDA events on a GPU (device-accurate), perf_counter elsewhere; returns ms."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __call__(self, fn) -> float:
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3


@torch.no_grad()
def measure_point(model, recipe: Recipe, S: int, B: int, G: int, K: int, cfg: SweepConfig) -> dict:
    """Time step and fold at one point; returns the measured columns and raw samples."""
    device = torch.device(cfg.device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    cache = model.synthetic_cache(B, S, device, seed=cfg.seed, capacity=S + G, block_size=G)
    gen = torch.Generator().manual_seed(cfg.seed)
    tokens = torch.randint(0, recipe.vocab_size, (B, G), generator=gen).to(device)
    timer = Timer(device)

    def step():
        model(tokens, cache)

    def fold():
        model.fold(tokens, cache)
        cache.set_length(S)  # rewound: the data past S is overwritten by the next fold

    with ops.trace() as ran:
        for _ in range(cfg.warmup):
            step()
            fold()
        # each replayed from one capture (fsc.graphs); a model with MoE layers steps eagerly
        if cfg.graphs and graphs.usable(device):
            step = graphs.capture(step, warm=cfg.warmup == 0)[0].replay
            fold = graphs.capture(fold, warm=cfg.warmup == 0)[0].replay
        steps = [timer(step) for _ in range(cfg.repeats)]
        folds = [timer(fold) for _ in range(cfg.repeats)]
    if device.type == "cuda":
        peak = int(torch.cuda.max_memory_allocated(device))
    else:  # no allocator statistics on the CPU: the tensors this point holds
        peak = sum(p.numel() * p.element_size() for p in model.parameters()) + cache.nbytes().total_bytes
    t_step, t_fold = statistics.median(steps), statistics.median(folds)
    return {
        "step_ms": t_step,
        "step_ms_p10": _percentile(steps, 0.1),
        "step_ms_p90": _percentile(steps, 0.9),
        "fold_ms": t_fold,
        "fold_ms_p10": _percentile(folds, 0.1),
        "fold_ms_p90": _percentile(folds, 0.9),
        "tokens_per_s": B * G / ((K * t_step + t_fold) / 1e3),
        "peak_bytes": peak,
        "mixer_backends": _mixer_backends(model, ran.backends),
        "samples": {"step": steps, "fold": folds},
    }


def _mixer_backends(model, ran: dict[str, str]) -> dict[str, str]:
    """Mixer kind -> the backends its ops ran on (`ran`: a trace's op -> backend)."""
    kinds = dict.fromkeys(layer.mixer.kind for layer in model.layers)
    return {k: "+".join(sorted({ran.get(op, "?") for op in MIXERS[k].ops})) for k in kinds}



class Sweep:
    """Runs the points of a sweep (fsc.sweep.plan) in order, handing each finished row to
    `on_point` and then to `on_progress`."""

    def __init__(self, cfg: SweepConfig, points: list[Point], on_point, on_progress=None):
        self.cfg, self.points, self.on_point = cfg, points, on_point
        self.on_progress = on_progress or (lambda *a: None)
        self.device = torch.device(cfg.device)
        self.spec = cfg.spec or device_spec_for(self.device)

    def run(self) -> list[PointResult]:
        rows = []
        models: dict[str, tuple] = {}
        for p in self.points:
            if p.ref not in models:
                models.clear()  # one model resident at a time
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
                models[p.ref] = self._load(p.ref)
            recipe, model, failed = models[p.ref]
            if model is None:
                row = self._skipped(recipe, p.S, p.B, p.G, p.K, *failed)
            else:
                row = self._point(recipe, model, p.S, p.B, p.G, p.K)
            self.on_point(row)
            rows.append(row)
            self.on_progress(row)
        return rows

    def _does_not_fit(self, recipe: Recipe, S: int, B: int, G: int, weight_bytes: int) -> str | None:
        """Why a point does not fit (check_fits' message), or None. A --memory-budget bounds
        everything the point holds; without one, the free memory now plus the weights already
        resident."""
        budget = self.cfg.memory_budget
        if budget is None:
            budget = free_bytes(self.device) + weight_bytes
        try:
            check_fits(recipe, self.device, S, B, G, budget,
                       asked=self.cfg.memory_budget is not None)
        except WeightsDoNotFit as e:
            return str(e)
        return None

    def _result(self, recipe: Recipe, S: int, B: int, G: int, K: int, **columns) -> PointResult:
        return PointResult(recipe.name, recipe.recipe_hash, recipe.layer_plan, S, B, G, K,
                           self.cfg.dtype or recipe.dtype, self.cfg.backend, str(self.device),
                           started_at=_now(), **columns)

    def _skipped(self, recipe: Recipe, S: int, B: int, G: int, K: int, status: str, error: str,
                 tb: str | None) -> PointResult:
        """The row of a point whose model could not be built: `status` 'oom' (its weights do
        not fit, or their allocation failed) or 'error', with why. Sizes in the run's dtype."""
        ran_as = recipe.with_dtype(self.cfg.dtype or recipe.dtype)
        mem = memory(ran_as, S, B, G)
        return self._result(recipe, S, B, G, K, status=status, error=error, traceback=tb,
                            weight_bytes=mem.weight_bytes,
                            cache_bytes=cache_bytes(ran_as, B, S).total_bytes,
                            predicted_total_bytes=mem.total_bytes, ended_at=_now())

    def _load(self, ref: str):
        """(recipe, model, None), or (recipe, None, (status, error, traceback)) when the model
        could not be built: 'oom' when its weights would not fit or their allocation failed,
        'error' for any other failure. Either way its points become rows and the sweep goes on,
        as for a point that fails."""
        dtype = TORCH_DTYPES[self.cfg.dtype] if self.cfg.dtype else None
        try:
            recipe, model = load_model(ref, device=self.cfg.device, seed=self.cfg.seed, dtype=dtype,
                                       budget=self.cfg.memory_budget)
        except WeightsDoNotFit as e:
            return load_source_recipe(ref), None, ("oom", str(e), None)
        except Exception as e:  # noqa: BLE001 - one recipe that cannot be built must not end the sweep
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            status = "oom" if is_out_of_memory(e) else "error"
            return load_source_recipe(ref), None, (status, f"{type(e).__name__}: {e}",
                                                   traceback.format_exc())
        return recipe, model, None

    def _point(self, recipe: Recipe, model, S: int, B: int, G: int, K: int) -> PointResult:
        dtype = self.cfg.dtype or recipe.dtype
        ran_as = recipe.with_dtype(dtype)
        mem = memory(ran_as, S, B, G)
        if self.spec:
            pred = predict_point(ran_as, S, B, G, K, self.spec)
        else:  # no device figures (the CPU): bytes are still known, the floor is not
            pred = {"predicted_step_bytes": pass_cost(ran_as, S, B, G).bytes,
                    "predicted_total_bytes": mem.total_bytes}
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        row = self._result(
            recipe, S, B, G, K, predicted_step_bytes=pred.get("predicted_step_bytes"),
            predicted_total_bytes=pred.get("predicted_total_bytes"),
            floor_ms=pred.get("floor_ms"), bound=pred.get("bound"), weight_bytes=weight_bytes,
            cache_bytes=model.cache_bytes(B, S).total_bytes)
        reason = self._does_not_fit(ran_as, S, B, G, weight_bytes)
        if reason is not None:
            row.status, row.error = "oom", reason
        else:
            try:
                with ops.backend(self.cfg.backend):
                    row = replace(row, **measure_point(model, recipe, S, B, G, K, self.cfg))
            except Exception as e:  # noqa: BLE001 - one failing point must not end the sweep
                row.status = "oom" if is_out_of_memory(e) else "error"
                row.error = f"{type(e).__name__}: {e}"
                row.traceback = traceback.format_exc()
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
        if row.status == "ok" and row.predicted_step_bytes:
            row.achieved_gbps = row.predicted_step_bytes / (row.step_ms / 1e3) / 1e9
            if row.floor_ms:
                row.roofline_fraction = row.floor_ms / row.step_ms
        row.ended_at = _now()
        return row


def device_spec_for(device: torch.device) -> DeviceSpec | None:
    """The device table's figures for a CUDA device; None on the CPU (no floor known)."""
    if device.type != "cuda":
        return None
    return device_spec(torch.cuda.get_device_name(device))
