"""`fsc profile` as a first user meets it on a CPU: a recipe that cannot be built, a point that
fails, recipes of different block sizes against the baseline, and a CPU's tables."""

import io
import json
import re
from dataclasses import replace

import pytest
import torch
from rich.console import Console

from fsc.cli.profile_render import render_rows
from fsc.costmodel import cache_bytes, memory
from fsc.source import load_source_recipe
from fsc.sweep_results import PointResult, baseline_notes, compare

QUICK = ["--S", "16", "--B", "1", "--warmup", "0", "--repeats", "1"]


def _flat(text: str) -> str:
    """Rich wraps at the console's width: whitespace joined, to assert on sentences."""
    return re.sub(r"\s+", " ", text)


def test_a_recipe_whose_model_cannot_be_built_is_recorded_and_the_sweep_goes_on(
        fsc_main, tmp_path, monkeypatch):
    """An allocation that fails while the weights are built (the cost model said they fit) is
    an oom row, any other failure an error row; the other recipes are measured."""
    from fsc import profile

    real = profile.load_model

    def load(ref, **kw):
        if ref == "tiny_attn":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if ref == "tiny_gla":
            raise RuntimeError("checkpoint shard 2 is truncated")
        return real(ref, **kw)

    monkeypatch.setattr(profile, "load_model", load)
    store = tmp_path / "st"
    res = fsc_main("profile", "-r", "tiny_attn", "-r", "tiny_gla", "-r", "tiny_mamba", *QUICK,
                   "--json", "--store", store)
    assert res.returncode == 0, res.stderr
    got = {(p["recipe"], p["S"]): (p["status"], p["error"]) for p in json.loads(res.stdout)["points"]}
    assert {k: v[0] for k, v in got.items()} == {
        ("tiny_attn", 16): "oom", ("tiny_gla", 16): "error", ("tiny_mamba", 16): "ok"}
    assert "OutOfMemoryError: CUDA out of memory" in got[("tiny_attn", 16)][1]
    assert "RuntimeError: checkpoint shard 2 is truncated" in got[("tiny_gla", 16)][1]
    rows = json.loads(fsc_main("query", "select status, count(*) as n from profile group by all "
                               "order by status", "--format", "json", "--store", store).stdout)
    assert rows == [{"status": "error", "n": 1}, {"status": "ok", "n": 1}, {"status": "oom", "n": 1}]
    runs = json.loads(fsc_main("runs", "--json", "--store", store).stdout)
    assert runs[0]["status"] == "finished"


def test_a_model_that_does_not_fit_records_its_sizes_at_the_dtype_it_runs(fsc_main, tmp_path):
    """attn_3b is a bf16 recipe; swept in fp32 its weights do not fit a 1 GiB budget, and the
    row's cache and weights are those of fp32, as a measured point's are."""
    res = fsc_main("profile", "-r", "attn_3b", "--dtype", "fp32", "--S", "64", "--B", "2",
                   "--memory-budget", "1GiB", "--json", "--store", tmp_path / "st")
    assert res.returncode == 0, res.stderr
    [p] = json.loads(res.stdout)["points"]
    fp32 = load_source_recipe("attn_3b").with_dtype("fp32")
    assert (p["status"], p["dtype"]) == ("oom", "fp32") and "weights need" in p["error"]
    assert p["cache_bytes"] == cache_bytes(fp32, 2, 64).total_bytes
    assert p["weight_bytes"] == memory(fp32, 64, 2, 32).weight_bytes


def test_a_failed_points_traceback_shows_with_fsc_debug(fsc_main, tmp_path, monkeypatch):
    """A point that raises is an error row and one line on stderr; FSC_DEBUG=1 adds where it
    failed, as it does for every other error of fsc."""
    from fsc import profile

    real = profile.measure_point

    def measure(model, recipe, S, *a, **kw):
        if S == 32:
            raise RuntimeError("kernel launch failed")
        return real(model, recipe, S, *a, **kw)

    monkeypatch.setattr(profile, "measure_point", measure)
    args = ["profile", "-r", "tiny_mamba", *QUICK, "--S", "32",  # (with QUICK's: S 16 and 32)
            "--store", tmp_path / "st"]
    quiet = fsc_main(*args)
    assert quiet.returncode == 0, quiet.stderr
    assert "error tiny_mamba S=32 B=1 G=4 K=4: RuntimeError: kernel launch failed" in _flat(quiet.stderr)
    assert "Traceback" not in quiet.stderr
    monkeypatch.setenv("FSC_DEBUG", "1")
    loud = fsc_main(*args)
    assert loud.returncode == 0, loud.stderr
    assert "Traceback (most recent call last)" in loud.stderr and "in measure" in loud.stderr
    statuses = json.loads(fsc_main("query", "select S, status from profile order by point_id",
                                   "--format", "json", "--store", tmp_path / "st").stdout)
    assert [(r["S"], r["status"]) for r in statuses] == [(16, "ok"), (32, "error")] * 2


def test_recipes_of_another_block_size_say_why_they_have_no_ratio(fsc_main, tmp_path):
    """tiny_attn decodes blocks of 4, quality_mamba of 8: no point of the baseline at G 8, said
    in the cells and once below the table, with the options that line them up."""
    res = fsc_main("profile", "-r", "tiny_attn", "-r", "quality_mamba", *QUICK,
                   "--store", tmp_path / "st")
    assert res.returncode == 0, res.stderr
    text = _flat(res.stdout)
    assert "baseline none" in text and "baseline -" not in text
    assert ("tiny_attn was not measured at G 8, K 8: no ratio there (each recipe runs at its "
            "own block size unless --G and --steps give one for all)") in text
    rows = [replace(_cpu_row(name, 1.0), G=G, K=G, layer_plan=[plan])
            for name, plan, G in (("attn", "attention", 4), ("mamba", "mamba", 8),
                                  ("mamba", "mamba", 4))]
    assert [(x["G"], x["baseline_status"], x["latency_x"]) for x in compare(rows)] == [
        (4, "ok", 1.0), (8, "none", None)]
    # a point of the baseline missing at a G it ran at (a partial run): no ratio, but no
    # block size to blame
    partial = [*rows, replace(rows[2], S=2048)]
    assert [x["baseline_status"] for x in compare(partial) if x["G"] == 4] == ["ok", "-"]
    assert [n for n in baseline_notes(compare(partial)) if "not measured" in n] == [
        "attn was not measured at G 8, K 8: no ratio there (each recipe runs at its own block "
        "size unless --G and --steps give one for all)"]


def _cpu_row(recipe, gbps):
    """A measured CPU point: no device figures, so no floor and no roofline."""
    return PointResult(recipe, "0123456789abcdef", ["attention"], 1024, 1, 4, 4, "fp32", "auto",
                       "cpu", step_ms=12.3, step_ms_p10=11.0, step_ms_p90=13.0, fold_ms=12.0,
                       tokens_per_s=80.0, peak_bytes=900_000, cache_bytes=524_288,
                       achieved_gbps=gbps)


def _table(width, rows):
    console = Console(width=width, file=io.StringIO(), color_system=None)
    render_rows(rows, "20250101T000000-abcdef", "/s/fsc.duckdb", "fsc query ...", console,
                Console(file=io.StringIO()))
    return console.file.getvalue()


def test_a_cpus_bandwidth_keeps_its_figures():
    text = _table(200, [_cpu_row("tiny_attn", 0.0471), _cpu_row("big", 3352.14)])
    assert " 0.047 " in text and " 3352.1 " in text and " 0.0 " not in text


@pytest.mark.parametrize("width", range(60, 140, 4))
def test_columns_without_a_figure_go_before_those_with_one(width):
    """On a CPU floor ms and roofline are '-' on every row: a narrow terminal drops them
    before GB/s, p10–p90 or the cache, which hold figures."""
    header = next(line for line in _table(width, [_cpu_row("tiny_attn", 0.3)]).splitlines()
                  if "recipe" in line)
    for empty in ("roofline", "floor ms"):
        if empty in header:
            assert all(c in header for c in ("p10–p90", "GB/s", "cache", "fold ms", "peak")), header


def test_a_size_that_is_no_integer_gets_an_example_in_its_range(cli, tmp_path):
    """Lengths get lengths for an example; a batch (or G, K) small counts, not 4k."""
    for option, example in (("--S", "(e.g. 1024,4096 or 4k)"), ("--B", "(e.g. 1,2,4)"),
                            ("--steps", "(e.g. 1,2,4)")):
        r = cli("profile", "-r", "tiny_attn", option, "1,x", "--store", tmp_path / "st")
        assert r.code == 2 and r.err.strip() == (f"error: {option}: 'x' is not an integer "
                                                 f"{example}"), r.err
