"""What every mixer kind declares about itself, without torch: `MixerSpec` and `MixerShape`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fsc.sections import Section


@dataclass(frozen=True)
class MixerShape:
    """What one layer of a mixer kind holds and does, as the cost model counts it.

    linears: (in_features, out_features) of each projection (2 FLOPs per weight per token).
    extra_params: parameters outside the projections (biases, conv, A_log, dt_bias, D).
    cache: element count per sequence of each cache tensor, as (per_token, fixed): a tensor of
        per_token · capacity + fixed elements per sequence. Attention's are per token (growing);
        the recurrent mixers' are fixed.
    scan_flops_per_token: FLOPs of the recurrence (and conv) per token, both directions.
    attn_flops_per_pair: FLOPs per (query token, key position) pair: QKᵀ and PV, 2 each per MAC.
    window: the most prefix positions a query reads (sliding-window attention); None: all S.
    cache_dtype: the dtype of its cache when the mixer fixes it, whatever the recipe says.
    """

    kind: str
    linears: tuple[tuple[int, int], ...]
    extra_params: int
    cache: dict[str, tuple[int, int]]
    scan_flops_per_token: int = 0
    attn_flops_per_pair: int = 0
    window: int | None = None
    cache_dtype: str | None = None

    @property
    def params(self) -> int:
        return sum(i * o for i, o in self.linears) + self.extra_params

    @property
    def growing(self) -> bool:
        return any(per_token for per_token, _ in self.cache.values())


@dataclass(frozen=True)
class MixerSpec:
    """One mixer kind, as the recipe schema, the cost model, the profiler, the model card and
    the GPU check know it. The torch module is `fsc/model/<kind>.py`; its kernels are the
    `ops` it dispatches through fsc.ops."""

    kind: str  # its name in recipes, layer plans and store rows
    letter: str  # its letter in `layers.pattern` and layer maps
    order: int  # its place among the kinds (schema fields, messages, tables)
    section: type[Section]  # the recipe section that configures it
    # (a fsc.recipe.Recipe, the layer above: named, not imported) -> what one layer holds and
    # does, torch-free
    shape: Callable[[Any], MixerShape]
    ops: tuple[str, ...]  # the fsc.ops names its step and fold dispatch
    tag: str  # its tag on a model card
    section_optional: bool = False  # every field has a default, so the section may be left out
    check: Callable[[Section, int], None] | None = None  # rules that need d_model (raise Bad)
    at_width: Callable[[dict, int, float], dict] | None = None  # the section at another width
