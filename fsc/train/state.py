"""A training run's checkpoint state on disk, beside each step directory's weights.

`step-NNNNNN/` (`step_dir`) holds, besides the checkpoint writer's files, the training state:
`training_state.safetensors` (AdamW moments, fp32 master weights when the recipe's dtype is
not fp32, RNG states, state passing's carried states) and `training_state.json` (the config,
the step, the data position): never pickle. `read_state` reads them back to resume a run, and
`prune` deletes the rolling saves past --keep. The loop that writes them is fsc.train.loop.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from fsc.errors import CheckpointError, UsageError

STATE_JSON = "training_state.json"
STATE_TENSORS = "training_state.safetensors"
STATE_FORMAT = 1


def step_dir(out: Path, step: int) -> Path:
    return out / f"step-{step:06d}"


def read_state(directory: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """(training_state.json, training_state.safetensors) of a step directory."""
    js, ts = directory / STATE_JSON, directory / STATE_TENSORS
    if not js.is_file() or not ts.is_file():
        raise UsageError(f"--resume {directory}: no training state ({STATE_JSON}, {STATE_TENSORS}); "
                         "only a checkpoint `fsc train` saved can be resumed")
    try:
        state = json.loads(js.read_text())
        tensors = load_file(ts)
        assert state["format"] == STATE_FORMAT
    except (OSError, ValueError, KeyError, AssertionError, SafetensorError) as e:
        raise CheckpointError(f"{directory}: unreadable training state ({e})") from None
    return state, tensors


def carried_tensors(carried: dict[int, list]) -> dict[str, torch.Tensor]:
    """State passing's carried states as training-state tensors: carry.MICRO.LAYER.NAME."""
    return {f"carry.{micro}.{i}.{name}": t for micro, ends in carried.items()
            for i, end in enumerate(ends) if end is not None for name, t in end.items()}


def carried_of(tensors: dict[str, torch.Tensor], device) -> dict[int, list]:
    """The carried states a training state holds (the inverse of `carried_tensors`)."""
    carried: dict[int, dict[int, dict]] = {}
    for key, t in tensors.items():
        if key.startswith("carry."):
            _, micro, layer, name = key.split(".", 3)
            carried.setdefault(int(micro), {}).setdefault(int(layer), {})[name] = t.to(device)
    return {m: [layers.get(i) for i in range(max(layers) + 1)] for m, layers in carried.items()}


def prune(out: Path, keep: int, newest: Path) -> None:
    """Delete all but the `keep` newest rolling saves of a training directory (0: keep all),
    never `newest` (the one `latest` names), and the hidden directories a killed save left. A
    step directory whose training state does not say it is rolling is kept, and so is one the
    working directory is in (a shell that sits there, a relative --out or --resume that goes
    through it): a later save deletes it once the run's working directory is elsewhere."""
    here = _working_dir()
    for leftover in out.glob(".step-*"):
        if leftover.is_dir() and not _holds(leftover, here):
            shutil.rmtree(leftover, ignore_errors=True)
    if not keep:
        return
    rolling = []
    for d in out.glob("step-*"):
        try:
            if not json.loads((d / STATE_JSON).read_text()).get("milestone", True):
                rolling.append(d)
        except (OSError, ValueError, AttributeError):
            continue
    rolling.sort(key=lambda d: d.name, reverse=True)
    for d in rolling[keep:]:
        if d != newest and not _holds(d, here):
            shutil.rmtree(d, ignore_errors=True)


def _working_dir() -> Path | None:
    try:
        return Path.cwd()
    except OSError:  # deleted under the process already
        return None


def _holds(folder: Path, here: Path | None) -> bool:
    """Whether `here` (the working directory) is `folder` or inside it."""
    return here is not None and here.is_relative_to(folder.resolve())
