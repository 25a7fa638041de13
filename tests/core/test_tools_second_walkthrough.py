"""The benchmark tools of docs/benchmarks.md again, past the obvious: a bad name or device is
one line and exit 2, a store that cannot hold a store is refused before the work it would have
lost, a number given twice in a comma list is refused, what a row is labelled is what was
measured (a context, a prompt's S, a one-point query, the run a figure draws)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fsc.errors import FscError
from fsc.store import Store
from tools import bench, bench_decode, bench_decode_gpu, bench_store, options, quality

ROOT = Path(__file__).resolve().parents[2]


def _work(*args, **kw):
    raise AssertionError("the tool started its work")


def _refused(main, argv: list[str]) -> str:
    """main(argv) refused with exit 2; the message."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    return str(e.value)


@pytest.mark.parametrize("args, says", [
    (["--models", "foo"], "unknown model 'foo'"),
    (["--models", ","], "--models: name at least one"),
    (["--models", "llama,llama"], "--models: llama given twice"),
    (["--sides", "fsc,transformers,fsc"], "--sides: fsc given twice"),
    (["--device", "gpu0"], "--device 'gpu0': one of cpu, cuda, cuda:N, auto"),
])
def test_bench_decode_refuses_a_bad_name_with_exit_2_before_any_model(args, says, monkeypatch):
    """They ended with exit 1 (a bare SystemExit message), or ran a model twice, or raised
    torch's RuntimeError after a model was saved."""
    monkeypatch.setattr(bench_decode, "_save", _work)
    assert says in _refused(bench_decode.main, args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
def test_bench_decode_on_cuda_without_cuda_is_one_line(monkeypatch):
    """It was torch's 'not compiled with CUDA' traceback, after the model was saved; cuda:0
    was also refused as 'CUDA only' for the compiled side."""
    monkeypatch.setattr(bench_decode, "_save", _work)
    assert "no CUDA device here" in _refused(bench_decode.main, ["--device", "cuda"])
    said = _refused(bench_decode.main, ["--sides", "transformers-compile,fsc", "--device",
                                        "cuda:0"])
    assert "no CUDA device here" in said


def test_the_boundary_prints_a_refusal_in_one_line(capsys):
    def main():
        raise options.Refused("unknown model 'foo'; some of llama")

    with pytest.raises(SystemExit) as e:
        options.boundary(main, "python -m tools.x")
    assert e.value.code == 2
    assert capsys.readouterr().err == "python -m tools.x: error: unknown model 'foo'; some of llama\n"


@pytest.mark.slow  # a new interpreter importing torch: 3 s
def test_bench_decode_at_the_command_line_says_it_in_one_line():
    out = subprocess.run([sys.executable, "-m", "tools.bench_decode", "--models", "foo"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["python -m tools.bench_decode: error: unknown model "
                                       "'foo'; some of llama, mamba2, qwen3-0.6b"]


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "store.txt"
    path.write_text("not a folder")
    return path


def test_a_store_that_cannot_hold_a_store_is_refused_before_the_work(a_file, monkeypatch):
    """bench_decode, bench_harness and bench_decode_gpu opened the store only after all their
    work (a FileExistsError traceback, the measurements lost); bench the same before its
    sections."""
    from tools import bench_harness

    monkeypatch.setattr(bench_decode, "_save", _work)
    monkeypatch.setattr(bench_harness, "_llama", _work)
    monkeypatch.setattr(bench_decode_gpu, "profiled", _work)
    monkeypatch.setattr(bench, "startup", _work)
    calls = [(bench_decode.main, ["--models", "llama"]), (bench_harness.main, []),
             (bench_decode_gpu.main, ["--recipes", "tiny_mamba", "--device", "cpu"]),
             (bench.main, ["--only", "startup"])]
    for main, argv in calls:
        with pytest.raises(FscError) as e:
            main([*argv, "--store", str(a_file)])
        assert e.value.exit_code == 2 and "is not a directory" in str(e.value)
    assert a_file.read_text() == "not a folder"


def test_a_number_given_twice_in_a_comma_list_is_refused():
    """quality --seeds 0,0 trained quality_mamba twice into one folder; bench --lengths
    256,256 timed one length twice."""
    for main, argv in ((quality.options, ["--seeds", "0,0"]),
                       (bench.options, ["--lengths", "256, 256"]),
                       (bench_decode_gpu.main, ["--S", "64,64"])):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    assert options.ints("0,1,2") == [0, 1, 2]


def test_bench_harness_refuses_a_context_longer_than_its_text(monkeypatch, capsys):
    """--context 200000 read at most the 111,540 characters of the text, with empty
    continuations, under the label '200000-character contexts'."""
    from tools import bench_harness

    monkeypatch.setattr(bench_harness, "_llama", _work)
    most = bench_harness._longest_context()
    _refused(bench_harness.main, ["--context", str(most + 1)])
    assert f"at most {most} characters" in " ".join(capsys.readouterr().err.split())


def test_bench_harness_requests_at_the_longest_context_are_whole():
    pytest.importorskip("lm_eval")
    from tools import bench_harness

    most = bench_harness._longest_context()
    ll, _ = bench_harness._requests(12, most)
    assert {(len(r.args[0]), len(r.args[1])) for r in ll} == {(most, 20)}
    # the default context's requests are those the recorded numbers read
    ll, rolling = bench_harness._requests(40)
    assert ll[3].args[0].startswith(bench_harness._text()[997:1197][:20])
    assert {len(r.args[0]) for r in rolling} == {400}


def test_bench_store_puts_every_sample_under_a_point_and_reads_one(tmp_path):
    """--rows 75 stored 25 samples under a point that did not exist, and below 212,100 rows
    the one-point query timed a lookup of point 4242, which was not there."""
    st = Store(tmp_path / "st")
    points = bench_store.build(st, 75)
    assert points == 2
    _, [(orphans,)] = st.query("select count(*) from samples where point_id not in "
                               "(select point_id from profile_points)")
    assert orphans == 0
    _, rows = st.query(bench_store.queries(points)["one_point_samples"])
    assert len(rows) == 25
    assert "point_id = 4242 " in bench_store.queries(20_000)["one_point_samples"]


def test_bench_store_says_a_failing_fsc_in_one_line():
    with pytest.raises(SystemExit, match=r"^fsc query \? --store \S+ failed \(exit 2\): error: \S"):
        bench_store._fsc("query", "?", "--store", "/dev/null/x")


def test_bench_decode_gpu_prompts_are_s_tokens_at_any_s():
    """At S below the prompt's head ('Prompt 0. ') the prompt was 72 tokens, recorded as S."""
    for S in (1, 4, 10, 64, 1000):
        assert len(bench_decode_gpu.prompt_text(S, 3)) == S
    assert bench_decode_gpu.prompt_text(64, 1).startswith("Prompt 1. The grass")


def test_bench_decode_gpu_refuses_a_bad_value_before_profiling(monkeypatch, tmp_path):
    """--S abc was a ValueError traceback; --recipes nope, --device xyz and --length 0 failed
    after a profile had run."""
    from fsc.errors import RecipeError

    monkeypatch.setattr(bench_decode_gpu, "profiled", _work)
    base = ["--device", "cpu", "--recipes", "tiny_mamba", "--store", str(tmp_path / "st")]
    for bad in (["--S", "abc"], ["--B", "0"], ["--length", "0"], ["--K", "0"],
                ["--device", "xyz"], ["--recipes", ""]):
        _refused(bench_decode_gpu.main, [*base, *bad])
    with pytest.raises(RecipeError):
        bench_decode_gpu.main([*base, "--recipes", "tiny_mamba,nope"])


def test_bench_decode_gpu_records_the_device_auto_picked(monkeypatch, tmp_path, capsys):
    """--device auto (the default) was recorded as environment('auto'): the host's CPU, even
    on the GPU machine."""
    import fsc.provenance

    seen = []
    real = fsc.provenance.environment
    monkeypatch.setattr(fsc.provenance, "environment", lambda d=None: seen.append(d) or real(d))
    monkeypatch.setattr(bench_decode_gpu, "profiled",
                        lambda *a: {"status": "oom", "tokens_per_s": None, "profile_run": "r"})
    bench_decode_gpu.main(["--recipes", "tiny_mamba", "--S", "64", "--B", "1",
                           "--store", str(tmp_path / "st")])
    assert seen == [None]
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["rows"][0]["decode"] is None


def test_bench_results_times_the_run_its_table_names(tmp_path, monkeypatch):
    """`fsc plot KIND` and `fsc report` took the store's defaults: the report of a store that
    also held trainings drew them too (5 figures where the table said 4 of the profile run)."""
    st = Store(tmp_path / "st")
    run = st.start_run("profile", "fsc profile", None, {})
    st.add_point(run, {"recipe": "tiny", "S": 64, "B": 1, "step_ms": 1.0}, {"step": [1.0]})
    st.finish_run(run)
    later = st.start_run("train", "fsc train", None, {})
    st.finish_run(later)
    seen: list[list[str]] = []

    def fsc(args):
        seen.append(args)
        Path(args[args.index("--out") + 1]).write_bytes(b"x")
        return ""

    monkeypatch.setattr(bench, "_fsc", fsc)
    bench.results(lambda *a: None, st.dir)
    plots = [a for a in seen if a[0] == "plot"]
    reports = [a for a in seen if a[0] == "report"]
    assert plots and reports
    assert all(a[a.index("--run") + 1] == run for a in plots)
    assert all(a[1] == run for a in reports)


def test_bench_train_refuses_an_empty_or_twice_named_recipe(monkeypatch):
    """--recipes '' said '.: is a directory'; a recipe named twice pooled its rounds twice."""
    from tools import bench_train

    monkeypatch.setattr(bench_train, "twins", _work)
    assert "name at least one recipe" in _refused(bench_train.main, ["--recipes", ","])
    said = _refused(bench_train.main, ["--recipes", "tiny_gla, tiny_gla"])
    assert said == "--recipes: tiny_gla given twice"
