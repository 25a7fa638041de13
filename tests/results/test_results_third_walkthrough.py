"""`fsc plot`, `fsc report`, `fsc compare`, third walkthrough: two checkpoints of one recipe
trained into two folders are both picked by default and drawn apart (line style or marker,
and what each trained or evaluated in its label), while two steps of one training are one; a
whole run id of another kind given to --run is refused; a run compared with itself says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from results_helpers import EVAL_COLUMNS, _once

from fsc.results import plots, report, select
from fsc.store import Store
from fsc.train.loop import TrainStep


def _flat(text: str) -> str:
    return " ".join(text.split())


def _train(st: Store, recipe: str, out: str, final: float) -> str:
    run = st.start_run("train", f"fsc train {recipe} --out {out}", None,
                       {"recipe": recipe, "out": out})
    st.add_rows("train_steps", run, [
        TrainStep(recipe, "h", "frontier", "passkey", s, 3.0 - (3.0 - final) * s / 20, 1e-3,
                  1.0, 256 * s, 1000.0, s / 10, None).row() for s in (1, 10, 20)])
    st.finish_run(run)
    return run


def _eval(st: Store, recipe: str, checkpoint: str, accuracy: float) -> str:
    run = st.start_run("eval", f"fsc eval {checkpoint}", None, {"recipe": recipe})
    st.add_rows("eval_cells", run, [
        {"checkpoint": checkpoint, "recipe": recipe, "recipe_hash": "h", "task": "niah",
         "mode": "diffusion", "G": 4, "K": 4, "length": 128 * m, "train_length": 128,
         "length_ratio": float(m), "depth": d, "n": 4, "correct": round(4 * accuracy),
         "accuracy": round(4 * accuracy) / 4, "token_accuracy": accuracy, "tokens_per_s": 1.0,
         "seconds": 1.0} for m in (1, 2) for d in (0.0, 1.0)], EVAL_COLUMNS)
    st.finish_run(run)
    return run


def _two_checkpoints(store: Path) -> dict[str, str]:
    """tiny_attn trained into /runs/pk and /runs/mix, tiny_mamba into /runs/m, each evaluated;
    /runs/pk evaluated twice (steps 20, then 40 after a resume): runs by name. Written once a
    process and copied to `store`, a new store."""
    return _once(("two checkpoints",), store, _write_two_checkpoints)


def _write_two_checkpoints(store: Path) -> dict[str, str]:
    st = Store(store)
    ids = {"train pk": _train(st, "tiny_attn", "/runs/pk", 1.0),
           "train mix": _train(st, "tiny_attn", "/runs/mix", 2.0),
           "train m": _train(st, "tiny_mamba", "/runs/m", 1.5),
           "eval pk 20": _eval(st, "tiny_attn", "/runs/pk/step-000020", 0.25),
           "eval mix": _eval(st, "tiny_attn", "/runs/mix/step-000020", 0.5),
           "eval m": _eval(st, "tiny_mamba", "/runs/m/step-000020", 0.75),
           "eval pk 40": _eval(st, "tiny_attn", "/runs/pk/step-000040", 1.0)}
    return ids


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_two_checkpoints_of_one_recipe_are_both_picked_one_training_once(cli, tmp_path):
    store = tmp_path / "store"
    ids = _two_checkpoints(store)
    evals = [ids[w] for w in ("eval mix", "eval m", "eval pk 40")]
    r = cli("plot", "niah", "--store", store, "--out", tmp_path / "niah.png", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["runs"] == evals and "each training directory apart" in doc["picked"]
    st = Store(store)
    assert select.pick_runs(st, select.TRAINING, []) == [
        ids[w] for w in ("train pk", "train mix", "train m")]
    assert select.pick_runs(st, select.RETRIEVAL, []) == evals
    assert set(report.pick(st, [])) == {ids[w] for w in ids if w != "eval pk 20"}


def test_two_checkpoints_of_one_recipe_are_drawn_apart(tmp_path):
    store = tmp_path / "store"
    ids = _two_checkpoints(store)
    st = Store(store)
    for kind in ("loss", "retrieval"):
        lines = {line.get_label(): line for line in plots.draw(st, kind).figure.axes[0].lines}
        attn = {k: v for k, v in lines.items() if k.startswith("tiny_attn")}
        assert len(attn) == 2, list(lines)
        looks = {(v.get_linestyle(), v.get_marker()) for v in attn.values()}
        assert len(looks) == 2, (kind, looks)  # one colour: the style or marker tells them apart
        where = ("pk", "mix") if kind == "loss" else ("pk/step-000040", "mix/step-000020")
        run = ("train" if kind == "loss" else "eval") + " {}"
        assert set(attn) == {f"tiny_attn · {where[0]} · {ids[run.format('pk' if kind == 'loss' else 'pk 40')]}",
                             f"tiny_attn · {where[1]} · {ids[run.format('mix')]}"}
        assert f"tiny_mamba · {ids[run.format('m')]}" in lines  # one run: as before
    titles = [ax.get_title() for ax in plots.draw(st, "niah").figure.axes if ax.get_title()]
    assert f"tiny_attn · mix/step-000020 · {ids['eval mix']}" in titles


@pytest.mark.slow  # the store of two checkpoints: 2 s where no test made it before
def test_the_documented_where_on_out_picks_a_training_directory(tmp_path):
    """docs/results.md's `--where "out = 'runs/pk'"` matched nothing: `out` is stored whole
    (absolute); its example is now a LIKE on the path's end."""
    ids = _two_checkpoints(tmp_path / "store")
    st = Store(tmp_path / "store")
    docs = (Path(__file__).parents[2] / "docs" / "results.md").read_text()
    where = re.search(r'--where "(out [^"]*)"', docs).group(1)
    labels = [ln.get_label() for ln in plots.draw(st, "loss", where=where).figure.axes[0].lines]
    assert labels == [f"tiny_attn · {ids['train pk']}"], labels


def test_a_random_weights_recipe_named_two_ways_is_one(cli, tmp_path):
    store = tmp_path / "store"
    st = Store(store)
    _eval(st, "tiny_attn", "tiny_attn", 0.25)
    newer = _eval(st, "tiny_attn", "/work/recipes/tiny_attn.yaml", 0.5)
    r = cli("plot", "niah", "--store", store, "--out", tmp_path / "n.png", "--json")
    assert r.code == 0 and json.loads(r.out)["runs"] == [newer], r.err


def test_a_whole_run_id_of_another_kind_is_refused(cli, tmp_path):
    store = tmp_path / "store"
    ids = _two_checkpoints(store)
    r = cli("plot", "niah", "--run", ids["train pk"], "--run", ids["eval mix"], "--store", store,
            "--out", tmp_path / "n.png")
    assert r.code == 2 and "Traceback" not in r.err
    assert (f"--run: run {ids['train pk']} is a train run; this takes an eval run "
            "(`fsc runs --kind eval` lists them)") in _flat(r.err)
    r = cli("plot", "latency", "--run", ids["eval m"], "--store", store,
            "--out", tmp_path / "l.png")
    assert r.code == 2 and f"run {ids['eval m']} is an eval run; this takes a profile run" in \
        _flat(r.err)
    assert not (tmp_path / "n.png").exists() and not (tmp_path / "l.png").exists()


def test_a_run_compared_with_itself_says_so(cli, made):
    r = cli("compare", made.run_b, "latest", "--store", made.store, "--fail-above", "1.01")
    assert r.code == 0  # every ratio 1: the gate passes, and the note says why
    assert (f"note: RUN_A ({made.run_b}) and RUN_B (latest) are both run {made.run_b}: it is "
            "compared with itself, every ratio 1") in _flat(r.err)
    r = cli("compare", made.run_b, "latest", "--store", made.store, "--json")
    assert any("compared with itself" in n for n in json.loads(r.out)["notes"])
    for args in ((made.run_a, made.run_b), (made.run_b, made.run_b)):  # two runs; as asked
        r = cli("compare", *args, "--store", made.store, "--json")
        assert not any("compared with itself" in n for n in json.loads(r.out)["notes"])
    # the same text, as asked, but a gate passing on it (`latest latest` in a CI script)
    r = cli("compare", "latest", "latest", "--store", made.store, "--fail-above", "1.01")
    assert r.code == 0 and ("compared with itself, every ratio 1, and --fail-above passes "
                            "whatever it measured") in _flat(r.err)
