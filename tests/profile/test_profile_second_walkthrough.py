"""`fsc profile` on a CPU, second pass: the command a baseline out of memory suggests measures
what the sweep measured, recipes of one name, --backend triton without a GPU, what a dry run
promises for a model whose points do not fit, a resumed dry run's count, and tok/s below 1."""

import io
import json
import os
import re
import shlex
import signal

import pytest
from rich.console import Console

from fsc.cli.profile_render import render_rows
from fsc.costmodel import memory
from fsc.recipe_yaml import shipped_dir
from fsc.source import load_source_recipe
from fsc.store import Store
from fsc.sweep import CPU_FILL_BYTES_PER_S
from fsc.sweep_results import PointResult, compare

QUICK = ["--warmup", "0", "--repeats", "1"]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _recipe_file(tmp_path, name: str, d_model: int = 64):
    """tiny_attn's recipe under another name (and width), in a folder whose name has a space."""
    body = (shipped_dir() / "tiny_attn.yaml").read_text()
    body = body.replace("name: tiny_attn", f"name: {name}").replace(
        "d_model: 64", f"d_model: {d_model}")
    path = tmp_path / "my recipes" / f"{name}.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(body)
    return path


def test_the_command_for_a_baseline_out_of_memory_measures_what_the_sweep_did(fsc_main, tmp_path):
    """In bf16, tiny_attn read from a file (named file_attn) needs 4.22 MiB at S 4096, B 4: out
    of a 3 MiB budget, which fits it at B 2. The command said reads the same file at the same
    dtype, and the point it measures fits (by name and in fp32 it was 'no such recipe', then
    an oom row)."""
    path = _recipe_file(tmp_path, "file_attn")
    store = tmp_path / "st"
    res = fsc_main("profile", "-r", path, "-r", "tiny_mamba", "--S", "4096", "--B", "4",
                   "--dtype", "bf16", "--memory-budget", "3MiB", *QUICK, "--json",
                   "--store", store)
    assert res.returncode == 0, res.stderr
    [x] = json.loads(res.stdout)["comparison"]
    assert (x["baseline_status"], x["baseline_fits_B"]) == ("oom", 2)
    assert x["baseline_command"] == (
        f"fsc profile -r {shlex.quote(str(path))} --S 4096 --B 2 --G 4 --steps 4 --dtype bf16 "
        f"--memory-budget 3MiB --store {shlex.quote(str(store))}")
    again = fsc_main(*shlex.split(x["baseline_command"])[1:], *QUICK, "--json")
    assert again.returncode == 0, again.stderr
    [p] = json.loads(again.stdout)["points"]
    assert (p["recipe"], p["B"], p["dtype"], p["status"]) == ("file_attn", 2, "bf16", "ok")


def test_two_recipes_of_one_name_are_refused(fsc_main, tmp_path):
    """A wider tiny_attn under the shipped one's name: rows and the baseline (found by name)
    would mix the two, so the sweep is refused before anything runs; the same recipe named
    twice (by name and by file) is one recipe and runs."""
    wide = _recipe_file(tmp_path, "tiny_attn", d_model=128)
    store = tmp_path / "st"
    res = fsc_main("profile", "-r", "tiny_attn", "-r", wide, "--S", "64", "--B", "1", *QUICK,
                   "--store", store)
    assert res.returncode == 2
    assert _flat(res.stderr) == (
        f"error: -r tiny_attn and -r {shlex.quote(str(wide))} are different recipes both named "
        "tiny_attn: their rows could not be told apart; give one of them another name (its "
        "`name:`) ")
    assert not (store / "fsc.duckdb").exists()
    same = fsc_main("profile", "-r", "tiny_attn", "-r", shipped_dir() / "tiny_attn.yaml",
                    "--S", "64", "--B", "1", "--dry-run", "--json", "--store", store)
    assert same.returncode == 0, same.stderr
    assert len(json.loads(same.stdout)["points"]) == 2


def test_backend_triton_without_a_gpu_is_refused_before_a_run(fsc_main, tmp_path, monkeypatch):
    """As in fsc decode and fsc verify: one line and exit 2, not a run of error rows."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    store = tmp_path / "st"
    for extra in ([], ["--dry-run"]):
        res = fsc_main("profile", "-r", "tiny_attn", "--S", "64", "--B", "1", "--backend",
                       "triton", *QUICK, *extra, "--store", store)
        assert res.returncode == 2, res.stdout
        assert _flat(res.stderr) == ("error: --backend triton needs a CUDA device, not cpu "
                                     "(give --device cuda, or --backend torch or auto) ")
    assert not (store / "fsc.duckdb").exists()


def test_a_dry_run_counts_building_a_model_none_of_whose_points_fits(fsc_main, tmp_path):
    """attn_3b at S 256k needs 74 GiB: the point is an oom row, but its 4.4 GiB of weights fit
    8 GiB and are built first (29 s measured here), which the rough time counts; weights over
    the budget are never built."""
    ask = ["profile", "-r", "attn_3b", "--S", "256k", "--B", "1", "--dry-run", "--json",
           "--store", tmp_path / "st"]
    doc = json.loads(fsc_main(*ask, "--memory-budget", "8GiB", check=0).stdout)
    [p] = doc["points"]
    weights = memory(load_source_recipe("attn_3b"), 262144, 1, 32).weight_bytes
    assert not p["fits"] and p["rough_s"] >= weights / CPU_FILL_BYTES_PER_S > 20
    small = json.loads(fsc_main(*ask, "--memory-budget", "1GiB", check=0).stdout)
    assert small["points"][0]["rough_s"] < 1


def test_a_resumed_dry_run_says_in_json_how_many_points_are_stored(fsc_main, tmp_path,
                                                                   monkeypatch):
    """The table's "2 already stored" is in the document too."""
    real = Store.add_point
    calls = []

    def stop_after_two(self, run_id, point, samples=None):
        calls.append(point)
        got = real(self, run_id, point, samples)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return got

    monkeypatch.setattr(Store, "add_point", stop_after_two)
    store = tmp_path / "st"
    res = fsc_main("profile", "-r", "tiny_attn", "--S", "16,32,64", "--B", "1", *QUICK,
                   "--store", store)
    assert res.returncode == 143, res.stderr
    monkeypatch.setattr(Store, "add_point", real)
    text = fsc_main("profile", "--resume", "latest", "--dry-run", "--store", store, check=0)
    assert "1 point on cpu, 2 already stored" in _flat(text.stdout)
    doc = json.loads(fsc_main("profile", "--resume", "latest", "--dry-run", "--json",
                              "--store", store, check=0).stdout)
    assert doc["points_stored_before"] == 2 and [p["S"] for p in doc["points"]] == [64]


def test_tokens_per_s_below_one_keep_their_figures():
    """A 3B recipe on a CPU makes 0.023 tok/s (K 32 passes of ~40 s and a fold per block of
    32): the table said 0."""
    row = PointResult("mamba_3b", "0123456789abcdef", ["mamba"], 1024, 1, 32, 32, "bf16",
                      "auto", "cpu", step_ms=41_000.0, step_ms_p10=40_000.0,
                      step_ms_p90=42_000.0, fold_ms=43_000.0, tokens_per_s=0.0234,
                      peak_bytes=6 * 2**30, cache_bytes=2**20)
    fast = PointResult(**{**row.columns(), "recipe": "fast", "tokens_per_s": 1593.4})
    console = Console(width=200, file=io.StringIO(), color_system=None)
    render_rows([row, fast], "r", "store", "fsc query ...", console, Console(file=io.StringIO()))
    lines = console.file.getvalue().splitlines()
    assert " 0.023 " in next(ln for ln in lines if "mamba_3b" in ln)
    assert " 1593 " in next(ln for ln in lines if "fast" in ln)


def test_the_command_for_a_baseline_keeps_the_sweeps_backend():
    """A sweep on --backend torch: the baseline's batch is measured on it too."""
    MiB = 2**20
    oom = PointResult("attn", "h", ["attention"], 65536, 8, 4, 4, "fp32", "torch", "cpu",
                      status="oom", weight_bytes=MiB, predicted_total_bytes=9 * MiB)
    ok = PointResult("mamba", "m", ["mamba"], 65536, 8, 4, 4, "fp32", "torch", "cpu",
                     step_ms=1.0, step_ms_p10=1.0, step_ms_p90=1.0, fold_ms=1.0,
                     fold_ms_p10=1.0, fold_ms_p90=1.0, tokens_per_s=6400.0, peak_bytes=MiB)
    [x] = compare([oom, ok], memory_budget=6 * MiB, refs={"attn": "/r/my attn.yaml"})
    assert x["baseline_command"] == ("fsc profile -r '/r/my attn.yaml' --S 65536 --B 5 --G 4 "
                                     "--steps 4 --backend torch --memory-budget 6MiB")


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_reports_command_for_a_baseline_measures_what_the_sweep_did(fsc_main, tmp_path):
    """fsc report's baseline table gave the command by the recipe's name and without the
    run's --dtype, as fsc profile did."""
    path = _recipe_file(tmp_path, "file_attn")
    store = tmp_path / "st"
    res = fsc_main("profile", "-r", path, "-r", "tiny_mamba", "--S", "4096", "--B", "4",
                   "--dtype", "bf16", "--memory-budget", "3MiB", *QUICK, "--json",
                   "--store", store)
    run = json.loads(res.stdout)["run_id"]
    out = tmp_path / "r.md"
    assert fsc_main("report", run, "--store", store, "--out", out).returncode == 0
    said = " ".join(out.read_text().split())
    assert (f"fsc profile -r {shlex.quote(str(path))} --S 4096 --B 2 --G 4 --steps 4 "
            "--dtype bf16 --memory-budget 3MiB") in said, said


def test_ar_latency_compares_the_pass_that_makes_each_token():
    """In --mode ar (K 0) each token costs one fold; the step is never run by a decoder, yet
    latency × divided step times (2.98 against throughput's 0.21 on one CPU run)."""
    def ar(recipe, step, fold):
        return PointResult(recipe, recipe, ["attention"], 1024, 1, 1, 0, "fp32", "auto", "cpu",
                           step_ms=step, step_ms_p10=step, step_ms_p90=step, fold_ms=fold,
                           fold_ms_p10=fold, fold_ms_p90=fold, tokens_per_s=1e3 / fold,
                           peak_bytes=2**20)

    [x] = compare([ar("attn", 3.0, 2.0), ar("mamba", 1.0, 4.0)])
    assert x["latency_x"] == 0.5 and x["throughput_x"] == 0.5  # (step times: 3.0)


def test_a_training_directory_is_profiled_as_its_newest_step(fsc_main, tmp_path):
    """`fsc build`, `estimate`, `eval` and `decode` take a training directory; `fsc profile -r`
    refused it, saying it held no training run."""
    from fsc.checkpoint.io import save_checkpoint
    from fsc.model.lm import build_model

    save_checkpoint(build_model(load_source_recipe("tiny_mamba")), tmp_path / "run" / "step-000002",
                    seed=1)
    (tmp_path / "run" / "latest").write_text("step-000002\n")
    res = fsc_main("profile", "-r", "run", "--S", "64", "--B", "1", "--dry-run", check=0)
    assert res.returncode == 0, res.stderr
    assert "tiny_mamba" in res.stdout and "1 point" in res.stdout
