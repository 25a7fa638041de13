"""One decoding point (recipe, S, B, G, K, device) → memory, bytes, FLOPs, floor time, tokens/s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fsc.blocks import MODES, check_block
from fsc.costmodel.devices import DeviceSpec, resolve_device
from fsc.costmodel.roofline import (
    Memory,
    PassCost,
    check_point,
    max_batch,
    memory,
    oom_context,
    pass_cost,
)
from fsc.costmodel.shapes import CacheBytes, cache_bytes, ffn_shape, param_counts
from fsc.dtypes import DTYPE_BYTES
from fsc.errors import UsageError

if TYPE_CHECKING:
    from fsc.recipe import Recipe



@dataclass(frozen=True)
class Estimate:
    """Everything `fsc estimate` reports. Bytes are exact integers; times in seconds here,
    in ms in `to_dict`. `step` is the pass repeated per denoising step (diffusion) or per token
    (ar: one forward that predicts and folds, so `step` is the fold)."""

    recipe: Recipe
    mode: str
    S: int
    B: int
    G: int
    K: int  # denoising steps per block; 0 in ar mode (the fold predicts)
    device: DeviceSpec
    params: dict[str, int]
    cache: CacheBytes  # at S
    memory: Memory  # with room for S + G
    max_batch: int
    oom_context: int | None
    step: PassCost
    fold: PassCost
    comparison: dict | None  # None: there is no block diffusion to compare (G = 1)

    @property
    def fits(self) -> bool:
        return self.memory.total_bytes <= self.device.memory_bytes

    def time_per_block(self) -> float:
        """K·t_step + t_fold, seconds (ar: t_fold per token)."""
        return self.K * self.step.floor(self.device)[0] + self.fold.floor(self.device)[0]

    @property
    def tokens_per_s(self) -> float:
        return self.B * self.G / self.time_per_block()

    def moe(self) -> dict | None:
        ffn = ffn_shape(self.recipe)
        if ffn.kind != "moe":
            return None
        size, n = DTYPE_BYTES[self.recipe.dtype], self.recipe.n_layers
        read = ffn.experts_read(self.B * self.G)
        unused_per_token = n * (ffn.n_experts - ffn.top_k) * ffn.expert_params
        return {
            "n_experts": ffn.n_experts,
            "top_k": ffn.top_k,
            "resident_bytes": n * ffn.params * size,
            # what a pass reads of the MoE blocks: the router, the chosen experts, and the
            # shared expert and its gate, which every token runs
            "read_bytes_per_step": n * (ffn.router_params + read * ffn.expert_params
                                        + ffn.shared_params) * size,
            "experts_read_per_layer": read,
            "active_params_per_token": self.params["total"] - unused_per_token,
        }

    def to_dict(self) -> dict:
        spec = self.device
        t_step, bound = self.step.floor(spec)
        t_fold, fold_bound = self.fold.floor(spec)
        return {
            "recipe": self.recipe.name,
            "recipe_hash": self.recipe.recipe_hash,
            "mode": self.mode,
            "S": self.S, "B": self.B, "G": self.G, "K": self.K,
            "device": spec.to_dict(),
            "params": self.params,
            "param_count": self.params["total"],
            "weight_bytes": self.memory.weight_bytes,
            "kv_bytes": self.cache.kv_bytes,
            "state_bytes": self.cache.state_bytes,
            "cache_bytes": self.cache.total_bytes,
            "cache_capacity_bytes": self.memory.cache_capacity_bytes,
            "activation_bytes": self.memory.activation_bytes,
            "total_bytes": self.memory.total_bytes,
            "device_memory_bytes": spec.memory_bytes,
            "fits": self.fits,
            "max_batch": self.max_batch,
            "oom_context": self.oom_context,
            "step_bytes": self.step.bytes,
            "step_flops": self.step.flops,
            "step_bytes_by_part": _bytes_by_part(self.step),
            "step_flops_by_part": _flops_by_part(self.step),
            "arithmetic_intensity": self.step.flops / self.step.bytes,
            "floor_ms": t_step * 1e3,
            "bound": bound,
            "fold_bytes": self.fold.bytes,
            "fold_flops": self.fold.flops,
            "fold_floor_ms": t_fold * 1e3,
            "fold_bound": fold_bound,
            "block_ms": self.time_per_block() * 1e3,
            "tokens_per_s": self.tokens_per_s,
            "weight_sweeps_per_token": (self.K + 1) / self.G,
            "moe": self.moe(),
            "comparison": self.comparison,
        }


def _bytes_by_part(p: PassCost) -> dict[str, int]:
    return {"weights": p.weight_bytes, "kv_read": p.kv_read_bytes, "state_read": p.state_read_bytes,
            "cache_write": p.cache_write_bytes, "activations": p.activation_bytes}


def _flops_by_part(p: PassCost) -> dict[str, int]:
    return {"matmul": p.matmul_flops, "attention": p.attention_flops, "scan": p.scan_flops}


def _comparison(recipe: Recipe, S: int, B: int, G: int, K: int,
                spec: DeviceSpec) -> dict | None:
    """Autoregressive decoding (one forward per token, which folds it) against block diffusion
    (K steps and one fold per G tokens), at the same S and B on the same device; None at
    G = 1, where 'diffusion' is ar with a masked step added and every crossover is K < 0."""
    if G == 1:
        return None
    t_ar = pass_cost(recipe, S, B, 1, fold=True).floor(spec)[0]
    t_step = pass_cost(recipe, S, B, G).floor(spec)[0]
    t_fold = pass_cost(recipe, S, B, G, fold=True).floor(spec)[0]
    diffusion_tps = B * G / (K * t_step + t_fold)
    return {
        "ar_weight_sweeps_per_token": 1.0,
        "ar_tokens_per_s": B / t_ar,
        "diffusion_G": G,
        "diffusion_K": K,
        "diffusion_weight_sweeps_per_token": (K + 1) / G,
        "diffusion_tokens_per_s": diffusion_tps,
        "diffusion_speedup": diffusion_tps * t_ar / B,
        # (K + 1) / G < 1 exactly when K < G - 1: fewer weight sweeps than AR below this K.
        "sweep_crossover_steps": G - 1,
        # K·t_step + t_fold = G·t_ar: the K above which diffusion's floor is slower than AR's.
        "floor_crossover_steps": (G * t_ar - t_fold) / t_step,
    }


def estimate(recipe: Recipe, S: int, B: int, G: int | None = None, K: int | None = None,
             mode: str = "diffusion", gpu: str | DeviceSpec = "h100", *,
             bandwidth_tb_s: float | None = None, tflops: float | None = None,
             memory_gb: float | None = None) -> Estimate:
    """Estimate one decoding point.

    S: tokens in the cache; B: sequences; G: block size (default recipe.block_size; ar: 1);
    K: denoising steps per block (default G; ar: none, the fold predicts). gpu: a table name,
    a CUDA device name or a DeviceSpec; bandwidth_tb_s (TB/s), tflops (TFLOP/s) and memory_gb
    (GB = 1e9 bytes) override its figures. Raises UsageError on a bad figure.
    """
    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)} (got {mode!r})")
    if mode == "ar":
        if G not in (None, 1):
            raise UsageError(f"ar decoding makes one token per forward: G must be 1 (got {G})")
        if K is not None:
            raise UsageError("ar decoding has no denoising steps: drop --steps (or use diffusion)")
        G, K = 1, 0
    else:
        G = recipe.block_size if G is None else G
        check_point(S, B, G)
        K = G if K is None else K
    check_point(S, B, G, K, k_min=1 if mode == "diffusion" else 0)
    if mode == "diffusion":
        check_block(G, K)  # K <= G, as decoding and the profiler take it
    spec = resolve_device(gpu, bandwidth_tb_s, tflops, memory_gb)
    fold = pass_cost(recipe, S, B, G, fold=True)
    Gd, Kd = (G, K) if mode == "diffusion" else (recipe.block_size, recipe.block_size)
    return Estimate(
        recipe=recipe, mode=mode, S=S, B=B, G=G, K=K, device=spec,
        params=param_counts(recipe),
        cache=cache_bytes(recipe, B, S),
        memory=memory(recipe, S, B, G),
        max_batch=max_batch(recipe, S, G, spec.memory_bytes),
        oom_context=oom_context(recipe, B, G, spec.memory_bytes),
        step=fold if mode == "ar" else pass_cost(recipe, S, B, G),
        fold=fold,
        comparison=_comparison(recipe, S, B, Gd, Kd, spec),
    )


def predict_point(recipe: Recipe, S: int, B: int, G: int, K: int, spec: DeviceSpec) -> dict:
    """The cost model's prediction for one profiled point (step and fold timed separately,
    tokens/s = B·G / (K·t_step + t_fold)). Bytes are integers, times in ms."""
    check_point(S, B, G, K)
    step, fold = pass_cost(recipe, S, B, G), pass_cost(recipe, S, B, G, fold=True)
    t_step, bound = step.floor(spec)
    t_fold, fold_bound = fold.floor(spec)
    return {
        "predicted_step_bytes": step.bytes,
        "predicted_fold_bytes": fold.bytes,
        "predicted_step_flops": step.flops,
        "predicted_fold_flops": fold.flops,
        "predicted_total_bytes": memory(recipe, S, B, G).total_bytes,
        "floor_ms": t_step * 1e3,
        "bound": bound,
        "fold_floor_ms": t_fold * 1e3,
        "fold_bound": fold_bound,
        "predicted_tokens_per_s": B * G / (K * t_step + t_fold),
    }


def fits(recipe: Recipe, S: int, B: int, G: int, free_bytes: int) -> bool:
    """Whether weights + cache (capacity S + G) + activations fit in `free_bytes`."""
    check_point(S, B, G)
    return memory(recipe, S, B, G).total_bytes <= free_bytes
