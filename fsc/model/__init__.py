"""Models from recipes: one torch module per mixer kind, composed with norms and MLP/MoE.

Each kind of the registry (fsc.mixers) has its module here, `fsc/model/<kind>.py`, which names
its Mixer subclass `MIXER`.
"""

import importlib

from fsc.mixers import KINDS


def _mixer_classes() -> dict:
    found = {}
    for kind in KINDS:
        cls = importlib.import_module(f"{__name__}.{kind}").MIXER
        assert cls.kind == kind, f"fsc.model.{kind}.MIXER has kind {cls.kind!r}"
        found[kind] = cls
    return found


MIXER_REGISTRY = _mixer_classes()
