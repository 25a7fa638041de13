"""Each recipe against the baseline where the baseline is out of memory at the point's batch:
against its largest batch that fits at that S (measured), or the batch the cost model fits and
the command that measures it; said in the table's title and below it."""

import io
import json

import pytest
from fsc_run import in_process
from rich.console import Console

from fsc.cli.profile_render import render_rows
from fsc.sweep_results import PointResult, compare

MiB = 2**20


def _point(recipe, S, B, step=None, status="ok", plan=("mamba",), **kw) -> PointResult:
    """A measured point (step ms `step`, fold as long, p10–p90 ±1 %) or an oom one whose cost
    model puts 1 MiB of weights and 1 MiB per sequence."""
    row = PointResult(recipe, "h", list(plan), S, B, 4, 4, "fp32", "auto", "cpu", status=status,
                      weight_bytes=MiB, predicted_total_bytes=MiB + B * MiB, **kw)
    if step is not None:
        row.step_ms, row.fold_ms = step, step
        row.step_ms_p10 = row.fold_ms_p10 = 0.99 * step
        row.step_ms_p90 = row.fold_ms_p90 = 1.01 * step
        row.tokens_per_s, row.peak_bytes = B * 4 / (5 * step) * 1e3, MiB * (1 + B)
    return row


def _sweep() -> list[PointResult]:
    attn = ("attention",)
    return [_point("attn", 4096, 1, 2.0, plan=attn),
            _point("attn", 4096, 8, status="oom", plan=attn),
            _point("attn", 65536, 8, status="oom", plan=attn),
            _point("mamba", 4096, 1, 1.0), _point("mamba", 4096, 8, 1.5),
            _point("mamba", 65536, 8, 1.5)]


def test_a_baseline_out_of_memory_is_compared_at_its_largest_batch_that_fits():
    comp = {(x["S"], x["B"]): x for x in compare(_sweep(), memory_budget=6 * MiB)}
    # measured: attention's B 1 at S 4096 against mamba's B 8 there; 8 × 4 tokens in 7.5 ms
    # against 4 in 10 ms: 10.67× the tokens per second
    at_8 = comp[(4096, 8)]
    assert at_8["baseline_B"] == 1 and abs(at_8["throughput_x"] - 32 / 7.5 / (4 / 10)) < 1e-9
    assert at_8["latency_x"] == 2.0 / 1.5 and not at_8["throughput_noise"]
    assert comp[(4096, 1)]["baseline_B"] == 1
    # not measured: 1 MiB of weights + 1 MiB a sequence in 6 MiB fits B 5, and how to measure it
    far = comp[(65536, 8)]
    assert far["baseline_B"] is None and far["throughput_x"] is None
    assert far["baseline_fits_B"] == 5
    assert far["baseline_command"] == ("fsc profile -r attn --S 65536 --B 5 --G 4 --steps 4 "
                                       "--memory-budget 6MiB")
    console = Console(file=io.StringIO(), width=250, markup=False)
    render_rows(_sweep(), "r", "store", "fsc query …", console, console,
                comparison=compare(_sweep(), memory_budget=6 * MiB))
    text = " ".join(console.file.getvalue().split())  # the title wraps
    assert "where attn is oom at B, against its largest batch that fits" in text
    assert "baseline B" in text and "10.67×" in text
    assert ("attn is out of memory at S 65536, B 8 and the sweep measured no smaller batch of "
            "it that fits; per the cost model it fits at B 5, which this measures: `fsc profile "
            "-r attn --S 65536 --B 5 --G 4 --steps 4 --memory-budget 6MiB`") in text
    # against mamba, attention's oom points keep their rows, saying so, with no ratio
    rows = [x for x in compare(_sweep(), "mamba") if x["status"] != "ok"]
    assert [(x["S"], x["B"], x["status"], x["throughput_x"]) for x in rows] == [
        (4096, 8, "oom", None), (65536, 8, "oom", None)]
    # a budget that holds not even one sequence says so; an unknown one asks for a smaller --B
    none = compare(_sweep(), free_bytes=MiB + MiB // 2)
    assert [x["baseline_fits_B"] for x in none if x["S"] == 65536] == [0]
    assert [x["baseline_fits_B"] for x in compare(_sweep()) if x["S"] == 65536] == [None]


def test_profile_on_the_cpu_compares_with_attention_at_the_batch_that_fits(tmp_path):
    # 3 MiB: tiny_attn at S 4096 fits B 1 (2.4 MiB) but not B 4 (8.4 MiB); tiny_mamba fits both
    res = in_process("profile", "-r", "tiny_attn", "-r", "tiny_mamba", "--S", "4096", "--B",
                     "1,4", "--warmup", "0", "--repeats", "1", "--memory-budget", "3MiB",
                     "--json", "--store", tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    status = {(p["recipe"], p["B"]): p["status"] for p in doc["points"]}
    assert status == {("tiny_attn", 1): "ok", ("tiny_attn", 4): "oom", ("tiny_mamba", 1): "ok",
                      ("tiny_mamba", 4): "ok"}
    at_4 = next(x for x in doc["comparison"] if x["B"] == 4)
    assert at_4["baseline_B"] == 1 and at_4["throughput_x"] > 0


def test_the_versus_table_says_what_each_ratio_divides(tmp_path, monkeypatch):
    # latency × is one step's, throughput × a whole block's (K steps and the fold) over B rows:
    # the two can disagree in sign, so the table says which is which
    monkeypatch.setenv("COLUMNS", "200")
    res = in_process("profile", "-r", "tiny_attn", "-r", "tiny_mamba", "--S", "16", "--B", "1",
                     "--warmup", "0", "--repeats", "1", "--device", "cpu", "--store", tmp_path)
    assert res.returncode == 0, res.stderr
    after = res.stdout.split("versus tiny_attn")[1]
    assert "latency ×: the baseline's step time over the recipe's" in " ".join(after.split())
    assert "over whole blocks (K steps and the fold) of all B rows" in " ".join(after.split())


def test_a_baseline_measured_twice_is_compared_at_its_first_point():
    """A recipe given twice (-r attn -r attn) is measured twice; the ratios read its first
    point, as `fsc compare` pairs a run's first with another run's first."""
    attn = ("attention",)
    rows = [_point("attn", 4096, 1, 2.0, plan=attn), _point("attn", 4096, 1, 4.0, plan=attn),
            _point("mamba", 4096, 1, 1.0)]
    [mamba] = compare(rows)
    assert mamba["recipe"] == "mamba" and mamba["latency_x"] == 2.0


def test_fsc_profile_compares_at_a_recipes_first_point_when_it_is_given_twice(fsc_main, tmp_path):
    """At the command line: `-r tiny_attn -r tiny_attn` measures the baseline twice, and the
    recipes are held to its first point."""
    res = fsc_main("profile", "-r", "tiny_attn", "-r", "tiny_attn", "-r", "tiny_mamba", "--S",
                   "64", "--B", "1", "--warmup", "0", "--repeats", "1", "--json", "--store",
                   tmp_path / "st", check=0)
    doc = json.loads(res.stdout)
    first = next(p for p in doc["points"] if p["recipe"] == "tiny_attn")
    mamba = next(p for p in doc["points"] if p["recipe"] == "tiny_mamba")
    [versus] = doc["comparison"]
    assert versus["recipe"] == "tiny_mamba" and versus["baseline"] == "tiny_attn"
    assert versus["latency_x"] == first["step_ms"] / mamba["step_ms"]


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_recipe_out_of_memory_has_its_row_against_the_baseline(tmp_path):
    """Against a baseline that fits, a recipe out of memory at a point was left out of the
    table, as if it had not been asked for: its row now says oom, with no ratio."""
    res = in_process("profile", "-r", "tiny_attn", "-r", "tiny_mamba", "--S", "4096", "--B",
                     "1,4", "--warmup", "0", "--repeats", "1", "--memory-budget", "3MiB",
                     "--json", "--store", tmp_path)
    assert res.returncode == 0, res.stderr
    run_id = json.loads(res.stdout)["run_id"]
    out = tmp_path / "r.md"
    res = in_process("report", run_id, "--baseline", "tiny_mamba", "--out", out,
                     "--store", tmp_path)
    assert res.returncode == 0, res.stderr
    table = out.read_text().split("Against tiny_mamba")[1]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| 4096")]
    assert [r[:5] for r in rows] == [["4096", "1", "4", "4", "tiny_attn"],
                                     ["4096", "4", "4", "4", "tiny_attn"]]
    assert rows[1][5:] == ["oom"] * 3
    assert all(c.endswith("×") or c == "noise" for c in rows[0][5:])
