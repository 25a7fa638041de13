"""tools.reach (`make reach`): the commands it runs for each backbone, and the whole of it on a
tiny model, from training to the RULER-style tables and figure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools import reach


def _value(args: list[str], option: str) -> str:
    return args[args.index(option) + 1]


def test_make_reach_trains_on_the_mix_with_the_knobs_eval_uses(monkeypatch):
    seen: list[list[str]] = []
    monkeypatch.setattr(reach, "run_json", lambda args: seen.append(args) or
                        {"step": 1, "final_loss": 0.0, "run_id": "r"})
    a = reach.options(["--seeds", "1"])
    assert a.recipes[2] == "passkey_hybrid_halflife8"  # make reach's hybrid: its memory bounded
    reach.train(("passkey_hybrid_halflife8", 1), a)
    reach.evaluate(("passkey_hybrid_halflife8", 1), a)
    train, evaluate = seen
    assert train[:2] == ["train", "passkey_hybrid_halflife8"] and "--supervise-needle" in train
    assert _value(train, "--data") == reach.MIX and _value(train, "--seq-len") == "128"
    assert _value(train, "--lr") == "0.01"
    assert _value(train, "--out").endswith("passkey_hybrid_halflife8-s1")
    for knob in ("--needles", "--hops", "--words"):
        assert _value(train, knob) == _value(evaluate, knob) == "2"
    assert _value(evaluate, "--task") == "ruler"
    assert _value(evaluate, "--lengths") == "128,256,512,1024,2048"
    assert "--set" not in evaluate and "--freeze" not in train
    seen.clear()
    reach.evaluate(("passkey_hybrid_halflife8", 1), reach.options(["--set", "attention.logn=128"]))
    assert _value(seen[0], "--set") == "attention.logn=128"
    seen.clear()  # post-training: from the earlier run's checkpoint, with state passing
    reach.train(("passkey_hybrid_halflife8", 1), reach.options(
        ["--start-from", "runs/reach", "--state-passing", "--out", "runs/sp"]))
    assert seen[0][1] == "runs/reach/passkey_hybrid_halflife8-s1" and "--state-passing" in seen[0]
    assert _value(seen[0], "--out") == "runs/sp/passkey_hybrid_halflife8-s1"
    seen.clear()  # the hybrid's attention trained first, its Mamba-2 mixers as initialised
    reach.train(("passkey_hybrid_halflife8", 1), reach.options(["--freeze", "mamba"]))
    assert _value(seen[0], "--freeze") == "mamba"


def test_a_recipe_given_as_a_path_trains_into_a_folder_named_by_its_file(monkeypatch):
    seen: list[list[str]] = []
    monkeypatch.setattr(reach, "run_json", lambda args: seen.append(args) or
                        {"step": 1, "final_loss": 0.0, "run_id": "r"})
    a = reach.options(["--recipes", "experiments/passkey_hybrid_first", "--lr", "1e-2", "--out",
                       "runs/x"])
    reach.train(("experiments/passkey_hybrid_first", 2), a)
    reach.evaluate(("experiments/passkey_hybrid_first", 2), a)
    train, evaluate = seen
    assert train[1] == "experiments/passkey_hybrid_first"  # fsc resolves the recipe itself
    assert _value(train, "--out") == "runs/x/passkey_hybrid_first-s2" == evaluate[1]
    assert reach.tag("recipes/x.yaml", 0) == "x" and reach.tag("published/Llama-3.1-8B", 1) == (
        "Llama-3.1-8B-s1")
    # a per-recipe value is found by the path or by the file's name; one found by neither is refused
    a = reach.options(["--recipes", "experiments/passkey_hybrid_halflife16,passkey_mamba"])
    assert a.lr == {"experiments/passkey_hybrid_halflife16": 1e-2, "passkey_mamba": 1e-2}
    a = reach.options(["--recipes", "dir/x,passkey_attn", "--train-steps", "dir/x=5,passkey_attn=7",
                       "--lr", "1e-3"])
    assert a.train_steps == {"dir/x": 5, "passkey_attn": 7}
    with pytest.raises(SystemExit, match="no value for experiments/nope"):
        reach.options(["--recipes", "experiments/nope"])


def test_a_recipe_with_no_lr_is_refused_at_the_command_line_in_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "tools.reach", "--recipes", "experiments/nope", "--out",
         str(tmp_path / "runs"), "--store", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("no value for experiments/nope in ")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "store").exists()


@pytest.mark.slow  # a minute: make test-slow (CI runs it)
def test_make_reach_end_to_end_on_a_tiny_model(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "tools.reach", "--recipes", "tiny_attn", "--lr", "3e-3",
         "--train-steps", "2", "--eval-every", "2", "--samples", "1", "--depths", "0.5",
         "--jobs", "1", "--out", str(tmp_path / "runs"), "--store", str(tmp_path / "store"),
         "--figures", str(tmp_path / "img")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "| tiny_attn | 1 |" in out.stdout  # the average, one seed
    for part in reach.PARTS + ["**average**"]:
        row = next(line for line in out.stdout.splitlines() if line.startswith(f"| {part} |"))
        assert row.count("|") == len(reach.RATIOS) + 2 and "–" not in row
    assert (tmp_path / "img" / "ruler.png").stat().st_size > 10_000
    # the same checkpoint scored with a weight-free change: its own rows, the plain ones kept
    where = ["--recipes", "tiny_attn", "--lr", "3e-3", "--out", str(tmp_path / "runs"), "--store",
             str(tmp_path / "store")]
    out = subprocess.run([sys.executable, "-m", "tools.reach", *where, "--skip-train",
                          "--samples", "1", "--depths", "0.5", "--set", "attention.logn=128"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "| tiny_attn+attention.logn=128 | 1 |" in out.stdout
    plain = subprocess.run([sys.executable, "-m", "tools.reach", *where, "--tables-only"],
                           capture_output=True, text=True, timeout=600)
    assert "| tiny_attn | 1 |" in plain.stdout and "logn" not in plain.stdout


@pytest.mark.slow  # half a minute: make test-slow (CI runs it)
def test_a_recipe_given_as_a_path_is_trained_scored_and_tabled(tmp_path):
    recipe = tmp_path / "mine" / "tiny_path.yaml"
    recipe.parent.mkdir()
    recipe.write_text(Path("recipes/tiny_attn.yaml").read_text().replace(
        "name: tiny_attn", "name: tiny_path"))
    out = subprocess.run(
        [sys.executable, "-m", "tools.reach", "--recipes", str(recipe), "--lr", "3e-3",
         "--train-steps", "2", "--eval-every", "2", "--samples", "1", "--depths", "0.5",
         "--jobs", "1", "--out", str(tmp_path / "runs"), "--store", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "runs" / "tiny_path" / "latest").exists()
    assert next(line for line in out.stdout.splitlines() if line.startswith("| tiny_path | 2 |"))
    assert f"| {recipe} | 1 |" in out.stdout  # the average, one seed


def test_the_levers_table_has_a_row_only_where_a_store_holds_its_runs(tmp_path):
    a = reach.options(["--out", str(tmp_path / "reach")])
    lines = reach.levers(a).splitlines()
    assert len(lines) == 2 and lines[0].startswith("| change | seeds | RULER average 1×")
    assert lines[0].count("|") == 2 * len(reach.RATIOS) + 3


def test_one_seed_of_several_recipes_is_also_printed_side_by_side():
    parts = {p: {float(x): 0.5 for x in reach.RATIOS} for p in reach.PARTS}
    some = {**parts, "vt": {1.0: 1.0}}  # vt scored at 1× only
    lines = reach.side_by_side({"a": parts, "b": some}, ["a", "b", "c"], 0, "")
    assert lines[3].startswith("| seed 0: task | a 1× |") and "| b 1× |" in lines[3]
    vt = next(line for line in lines if line.startswith("| vt |"))
    assert vt.count("|") == 2 * len(reach.RATIOS) + 2 and vt.count("–") == len(reach.RATIOS) - 1
    assert lines[-1].startswith("| **average** | 0.50 |") and lines[-1].endswith("| – |")
    assert reach.side_by_side({"a": parts}, ["a", "b"], 0, "") == []  # one recipe: nothing
