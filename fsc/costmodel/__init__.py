"""The cost model: pure arithmetic from a Recipe (no torch, no tensors; importing it loads
neither torch nor the recipe schema: a mixer's figures come from `Recipe.mixer_shape`).

Parameter counts and cache bytes equal what the built model reports and allocates; bytes moved
and FLOPs per pass give a roofline floor time per step on a device. Formulas, units and the
device figures' sources: docs/costmodel.md.
"""

from fsc.costmodel.devices import DEVICES, DeviceSpec, device_spec, resolve_device
from fsc.costmodel.estimator import Estimate, estimate, fits, predict_point
from fsc.costmodel.roofline import (
    Memory,
    PassCost,
    max_batch,
    memory,
    oom_context,
    pass_cost,
    prompt_memory,
)
from fsc.costmodel.shapes import CacheBytes, cache_bytes, param_counts, tensor_bytes

__all__ = [
    "DEVICES", "CacheBytes", "DeviceSpec", "Estimate", "Memory", "PassCost", "cache_bytes",
    "device_spec", "estimate", "fits", "max_batch", "memory", "oom_context", "param_counts",
    "pass_cost", "predict_point", "prompt_memory", "resolve_device", "tensor_bytes",
]
