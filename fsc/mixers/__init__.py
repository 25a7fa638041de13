"""The mixer registry: one torch-free module here per sequence-mixer kind, each with a `SPEC`.

Adding a kind is a module here (its recipe section, letter, shape, ops), its torch module in
fsc/model/<kind>.py and its kernel folder in kernels/; the recipe schema, the cost model, the
profiler, the model card and the GPU check read `MIXERS` and list no kinds themselves.
"""

from __future__ import annotations

import importlib
import pkgutil

from fsc.mixers.spec import MixerShape, MixerSpec


def _discover() -> dict[str, MixerSpec]:
    specs = []
    for info in pkgutil.iter_modules(__path__):
        spec = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SPEC", None)
        if spec is not None:
            assert spec.kind == info.name, f"fsc.mixers.{info.name} declares kind {spec.kind!r}"
            specs.append(spec)
    specs.sort(key=lambda s: s.order)
    letters = [s.letter for s in specs]
    assert len(set(letters)) == len(letters), f"two mixer kinds share a letter: {letters}"
    return {s.kind: s for s in specs}


MIXERS: dict[str, MixerSpec] = _discover()
KINDS: tuple[str, ...] = tuple(MIXERS)
KIND_OF_LETTER: dict[str, str] = {s.letter: s.kind for s in MIXERS.values()}

__all__ = ["KINDS", "KIND_OF_LETTER", "MIXERS", "MixerShape", "MixerSpec"]
