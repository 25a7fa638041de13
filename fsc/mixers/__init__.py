"""The mixer registry: one torch-free module here per sequence-mixer kind, each with a `SPEC`.

Adding a kind is a module here (its recipe section, letter, shape, ops), listed in `MIXERS`
below; its torch module in fsc/model/<kind>.py, listed in `fsc.model.MIXER_REGISTRY`; and its
kernel folder in kernels/. The recipe schema, the cost model, the profiler, the model card and
the GPU check read `MIXERS` and list no kinds themselves.
"""

from __future__ import annotations

from fsc.mixers import attention, gated_delta, gla, linear, mamba
from fsc.mixers.spec import MixerShape, MixerSpec


def _registry(specs: list[MixerSpec]) -> dict[str, MixerSpec]:
    specs = sorted(specs, key=lambda s: s.order)
    for what in ("kind", "letter", "order"):
        values = [getattr(s, what) for s in specs]
        assert len(set(values)) == len(values), f"two mixer kinds share a {what}: {values}"
    return {s.kind: s for s in specs}


MIXERS: dict[str, MixerSpec] = _registry([attention.SPEC, mamba.SPEC, linear.SPEC, gla.SPEC,
                                          gated_delta.SPEC])
KINDS: tuple[str, ...] = tuple(MIXERS)
KIND_OF_LETTER: dict[str, str] = {s.letter: s.kind for s in MIXERS.values()}

__all__ = ["KINDS", "KIND_OF_LETTER", "MIXERS", "MixerShape", "MixerSpec"]
