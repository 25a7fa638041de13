"""Stores to draw from: one real profile sweep, a made-up pair of runs whose ratios are known,
training and evaluation rows; and the checks every rendered figure must pass."""

from __future__ import annotations

import atexit
import copy
import json
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from fsc.cli.main import main
from fsc.cli.query import declared
from fsc.recipe import load_recipe
from fsc.store import Store
from fsc.train.loop import TrainStep

EVAL_COLUMNS = declared()["eval_cells"]  # the tasks' own columns, which the cells carry

REAL_SWEEP = ["-r", "tiny_attn", "-r", "tiny_mamba", "--S", "16,64", "--B", "1,2",
              "--repeats", "3", "--warmup", "1"]


def run_id_of(st: Store, kind: str = "profile") -> list[str]:
    _, rows = st.query(f"SELECT run_id FROM runs WHERE kind = '{kind}' ORDER BY started_at")
    return [r[0] for r in rows]


@pytest.fixture(scope="session")
def real_profile(tmp_path_factory) -> tuple[Path, str]:
    """A real `fsc profile` sweep of two tiny recipes: (store dir, run id)."""
    store = tmp_path_factory.mktemp("profile") / "store"
    assert main(["profile", *REAL_SWEEP, "--store", str(store)]) == 0
    (run_id,) = run_id_of(Store(store))
    return store, run_id


@dataclass
class Made:
    store: Path
    run_a: str
    run_b: str


def _env(st: Store, name: str = "NVIDIA H100 80GB HBM3") -> str:
    return st.register_environment({"fsc_version": "test", "host": "h", "git_commit": "abc1234",
                                    "git_dirty": False, "device_name": name,
                                    "device_memory_bytes": 80 * 2**30})


def point(recipe, S, B, step, spread=0.01, **kw) -> dict:
    """A profile point of a shipped recipe with step time `step` ms and p10–p90 ±spread."""
    r = load_recipe(recipe)
    fold = 1.5 * step
    return {"recipe": recipe, "recipe_hash": r.recipe_hash, "layer_plan": r.layer_plan,
            "S": S, "B": B, "G": 4, "K": 4, "dtype": "bf16", "backend": "auto", "device": "cuda:0",
            "status": "ok", "step_ms": step, "step_ms_p10": step * (1 - spread), "step_ms_p90": step * (1 + spread),
            "fold_ms": fold, "fold_ms_p10": fold * (1 - spread), "fold_ms_p90": fold * (1 + spread),
            "tokens_per_s": B * 4 / (4 * step + fold) * 1e3, "peak_bytes": 2**20 * S * B,
            "predicted_step_bytes": 2**20 * S, "predicted_total_bytes": 2**20 * S * B,
            "floor_ms": step / 3, "achieved_gbps": 1.0, "mixer_backends": json.dumps(
                {"attention": "triton"}), **kw}


_ONCE: dict[tuple, tuple[Path, Any]] = {}  # key -> (its store, made once a process; returned)


def _once(key: tuple, store: Path, write: Callable[[Path], Any]) -> Any:
    """What `write(a new store)` returns, written once a process for each `key` (a store of
    many rows is a second or more of DuckDB writes), its store copied to `store`."""
    if key not in _ONCE:
        first = Path(tempfile.mkdtemp(prefix="fsc-results-"))
        atexit.register(shutil.rmtree, first, True)
        _ONCE[key] = (first / "store", write(first / "store"))
    shutil.copytree(_ONCE[key][0], store)
    return copy.deepcopy(_ONCE[key][1])


def make_runs(store: Path, slow: float = 1.10) -> Made:
    """Two profile runs of tiny_attn and tiny_mamba on a (made-up) H100: B's step and fold
    times are `slow` × A's; A also has a point B lacks, and B one that A lacks. Written once a
    process for each `slow` and copied to `store`, a new store."""
    made = _once(("runs", slow), store, lambda first: _write_runs(first, slow))
    return Made(store, made.run_a, made.run_b)


def full_runs(store: Path) -> tuple[Made, dict[str, list[str]]]:
    """make_runs' store with train_and_eval_rows' runs after its own: written once a process
    and copied to `store`, a new store."""
    def write(first: Path) -> tuple[Made, dict[str, list[str]]]:
        return make_runs(first), _write_train_and_eval(first)

    made, ids = _once(("runs, train and eval",), store, write)
    return Made(store, made.run_a, made.run_b), ids


def _write_runs(store: Path, slow: float) -> Made:
    st = Store(store)
    env = _env(st)
    for name in ("tiny_attn", "tiny_mamba"):
        r = load_recipe(name)
        st.register_recipe(name, r.recipe_hash, r.to_yaml(), r.layer_plan)
    ids = []
    for tag, factor in (("a", 1.0), ("b", slow)):
        run = st.start_run("profile", f"fsc profile made-up {tag}", env,
                           {"recipes": ["tiny_attn", "tiny_mamba"], "kernel_tuning": None})
        for recipe, base in (("tiny_attn", 2.0), ("tiny_mamba", 1.0)):
            for S in (1024, 4096):
                for B in (1, 2):
                    st.add_point(run, point(recipe, S, B, base * S / 1024 * B * factor))
        extra = 65536 if tag == "a" else 131072
        st.add_point(run, point("tiny_attn", extra, 1, 50.0 * factor))
        st.finish_run(run)
        ids.append(run)
    return Made(store, *ids)


@pytest.fixture
def made(tmp_path) -> Made:
    """make_runs' store, a copy of its own for each test."""
    return make_runs(tmp_path / "store")


def train_and_eval_rows(store: Path) -> dict[str, list[str]]:
    """Training steps and niah cells of two made-up trained checkpoints, in `store`, a new
    store (written once a process and copied)."""
    return _once(("train and eval",), store, _write_train_and_eval)


def _write_train_and_eval(store: Path) -> dict[str, list[str]]:
    st = Store(store)
    env = _env(st, "AMD EPYC")
    out: dict[str, list[str]] = {"train": [], "eval": []}
    for recipe, final in (("tiny_attn", 0.5), ("tiny_mamba", 1.5)):
        run = st.start_run("train", f"fsc train {recipe}", env, {"recipe": recipe})
        st.add_rows("train_steps", run, [
            TrainStep(recipe, "h", "frontier", "passkey", s, 3.0 - (3.0 - final) * s / 100,
                      1e-3, 1.0, 256 * s, 1000.0, s / 10,
                      s / 100 if s % 50 == 0 else None).row() for s in range(10, 101, 10)])
        st.finish_run(run)
        out["train"].append(run)
        run = st.start_run("eval", f"fsc eval {recipe}", env, {"recipe": recipe})
        st.add_rows("eval_cells", run, [
            {"checkpoint": f"/ckpt/{recipe}", "recipe": recipe, "recipe_hash": "h",
             "task": "niah", "mode": "diffusion", "G": 4, "K": 4, "length": 256 * m,
             "train_length": 256, "length_ratio": float(m), "depth": d, "n": 10,
             "correct": round(10 * final * d / m / 2), "accuracy": round(10 * final * d / m / 2) / 10,
             "token_accuracy": 0.5, "tokens_per_s": 100.0, "seconds": 1.0}
            for m in (1, 2, 4) for d in (0.0, 0.5, 1.0)])
        st.finish_run(run)
        out["eval"].append(run)
    return out


# ---- what every rendered figure must show ----------------------------------------------------

def hex_rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def check_png(path: Path, min_size=(600, 300), colours: list[str] = ()) -> Image.Image:
    """The PNG has at least `min_size` pixels, is not blank (a real share of its pixels differ
    from the background, in many colours) and shows each of `colours`."""
    im = Image.open(path).convert("RGB")
    assert im.width >= min_size[0] and im.height >= min_size[1], im.size
    pixels = np.asarray(im, dtype=np.int32).reshape(-1, 3)
    drawn = int((pixels != pixels[0]).any(axis=1).sum())  # pixel 0 is the background
    assert drawn / len(pixels) > 0.02, f"{path.name}: only {drawn} pixels drawn"
    distinct = len(np.unique(pixels[:, 0] << 16 | pixels[:, 1] << 8 | pixels[:, 2]))
    assert distinct > 50, f"{path.name}: {distinct} colours"
    for c in colours:
        near = int((np.abs(pixels - np.array(hex_rgb(c))).sum(axis=1) < 30).sum())
        assert near > 30, f"{path.name}: colour {c} not drawn ({near} pixels)"
    return im


def eval_run(store: Path, recipe: str, task: str) -> str:
    """An eval run of one task on `recipe`'s made-up checkpoint, as `fsc eval` stores it:
    niah cells by length and depth, mqar cells by pair count, or one held-out loss cell."""
    st = Store(store)
    run = st.start_run("eval", f"fsc eval {recipe} --task {task}", _env(st, "AMD EPYC"),
                       {"recipe": recipe, "task": task})
    base = {"checkpoint": f"/ckpt/{recipe}", "recipe": recipe, "recipe_hash": "h", "task": task,
            "mode": "diffusion", "G": 4, "K": 4, "train_length": 256, "n": 10, "correct": 5,
            "accuracy": 0.5, "token_accuracy": 0.5, "tokens_per_s": 100.0, "seconds": 1.0}
    if task == "niah":
        cells = [base | {"length": 256 * m, "length_ratio": float(m), "depth": d}
                 for m in (1, 2) for d in (0.0, 1.0)]
    elif task == "mqar":
        cells = [base | {"length": 256 * m, "length_ratio": float(m), "pairs": p}
                 for m in (1, 2) for p in (2, 4)]
    else:
        cells = [base | {"length": 256, "accuracy": None, "token_accuracy": None, "correct": None,
                         "loss": 2.0}]
    st.add_rows("eval_cells", run, cells, EVAL_COLUMNS)
    st.finish_run(run)
    return run


RULER_PARTS = (("niah", "single"), ("niah", "multikey"), ("vt", None), ("cwe", None))


def ruler_run(store: Path, recipe: str, score) -> str:
    """An eval run of `fsc eval RUN --task ruler` on `recipe`'s made-up checkpoint: a cell per
    part of the suite, length ratio and (niah) depth, scored `score(part index, ratio, depth)`."""
    st = Store(store)
    run = st.start_run("eval", f"fsc eval {recipe} --task ruler", _env(st, "AMD EPYC"),
                       {"recipe": recipe, "task": "ruler"})
    base = {"checkpoint": f"/ckpt/{recipe}", "recipe": recipe, "recipe_hash": "h", "mode":
            "diffusion", "G": 4, "K": 4, "train_length": 128, "n": 10, "correct": 5,
            "accuracy": 0.5, "token_accuracy": 0.5, "tokens_per_s": 100.0, "seconds": 1.0}
    cells = [base | {"task": task, "variant": variant, "length": 128 * m,
                     "length_ratio": float(m), "depth": d, "score": score(i, m, d)}
             for i, (task, variant) in enumerate(RULER_PARTS) for m in (1, 2, 4)
             for d in ((0.0, 1.0) if task == "niah" else (None,))]
    st.add_rows("eval_cells", run, cells, EVAL_COLUMNS)
    st.finish_run(run)
    return run
