"""The benchmark and experiment tools (tools/) as docs/benchmarks.md runs them: every command
the doc shows still parses, bad values are refused in one line before any work, and what a
tool measures does not depend on things the doc does not name."""

from __future__ import annotations

import argparse
import importlib
import re
import shlex
import sys
from pathlib import Path

import pytest

from fsc.errors import StoreError, UsageError
from tools import bench, bench_train, quality, retrieval
from tools.options import boundary

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
GPU_ONLY = {"gpucheck", "train_gpu", "gpu_step_probe", "bench_decode_gpu"}


def _doc_commands() -> list[tuple[str, list[str]]]:
    """(tool, its arguments) of every `python -m tools.X ...` in docs/benchmarks.md: in code
    blocks (continued lines joined) and in inline code; `[...]` optional parts kept, elided
    commands (`...`) left out."""
    text = DOC.read_text()
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    lines = [line for b in blocks for line in b.replace("\\\n", " ").splitlines()]
    prose = re.sub(r"```[a-z]*\n.*?```", "", text, flags=re.S)
    lines += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]
    found = []
    for line in lines:
        for m in re.finditer(r"python3? -m tools\.(\w+)([^;#`]*)", line):
            if "..." not in m.group(2):
                found.append((m.group(1), shlex.split(m.group(2).replace("[", "").replace("]", ""))))
    return found


class _Parsed(Exception):
    pass


def _parse(tool: str, args: list[str], monkeypatch) -> None:
    """Parse `args` as the tool does, and stop there (nothing is run)."""
    module = importlib.import_module(f"tools.{tool}")
    if hasattr(module, "options"):  # its checks beyond argparse's too (per-recipe values)
        module.options(args)
        return
    parse = argparse.ArgumentParser.parse_args

    def parsed(self, argv=None, namespace=None):
        raise _Parsed(parse(self, argv, namespace))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parsed)
    monkeypatch.setattr(sys, "argv", [tool, *args])
    with pytest.raises(_Parsed):
        module.main()


def test_every_command_in_the_benchmarks_doc_parses(monkeypatch):
    commands = [(t, a) for t, a in _doc_commands() if t not in GPU_ONLY]
    assert len(commands) > 50 and {t for t, _ in commands} >= {"bench", "reach", "retrieval",
                                                              "quality", "bench_train"}
    for tool, args in commands:
        with monkeypatch.context() as m:
            _parse(tool, args, m)


def test_bench_sections_by_name_and_no_other():
    assert bench.options(["--only", "threads,steps"]).sections == ["steps", "threads"]
    assert bench.options(["--only", "threads, steps"]).sections == ["steps", "threads"]
    assert "scale" not in bench.options(["--skip", "scale"]).sections
    assert bench.options([]).sections == list(bench.SECTIONS)
    for bad in (["--skip", "startp"], ["--only", "decode", "--skip", "steps"],
                ["--lengths", "0"], ["--lengths", "256,x"]):
        with pytest.raises(SystemExit) as e:
            bench.options(bad)
        assert e.value.code == 2


def test_bench_records_the_command_it_was_given(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["pytest", "-q"])
    bench.main(["--only", "", "--store", str(tmp_path)])
    from fsc.store import Store

    _, [(command,)] = Store(tmp_path).query("select command from runs where kind = 'bench'")
    assert shlex.split(command) == ["python", "-m", "tools.bench", "--only", "", "--store",
                                    str(tmp_path)]  # quoted: it pastes back


def test_bench_profiles_on_the_cpu_wherever_it_runs(monkeypatch, tmp_path):
    """`fsc profile` picks a GPU when there is one: the steps and scale sections, whose tables
    say CPU, ask for the CPU."""
    seen: list[list[str]] = []

    def fsc(args):
        seen.append(args)
        if args[0] == "profile" and "-r" not in args:
            raise _Parsed  # scale: its first sweep is enough
        return '{"run_id": "r", "points": []}'

    monkeypatch.setattr(bench, "_fsc", fsc)
    bench.steps(lambda *a: None, tmp_path)
    with pytest.raises(_Parsed):
        bench.scale(lambda *a: None)
    assert all(args[args.index("--device") + 1] == "cpu" for args in seen) and len(seen) == 2


def test_a_failing_fsc_command_ends_the_bench_in_one_line(monkeypatch):
    """Not a CalledProcessError's traceback with the reason swallowed by capture_output."""
    said = "import sys; print('no such recipe', file=sys.stderr); sys.exit(2)"
    monkeypatch.setattr(bench, "FSC", [sys.executable, "-c", said])
    with pytest.raises(SystemExit, match=r"^fsc decode nope failed \(exit 2\): no such recipe$"):
        bench._fsc(["decode", "nope"])


def test_the_bench_times_fsc_at_one_thread_whatever_the_caller_set(monkeypatch):
    monkeypatch.setenv("FSC_THREADS", "4")
    said = "import os; print(os.environ['FSC_THREADS'])"
    monkeypatch.setattr(bench, "FSC", [sys.executable, "-c", said])
    assert bench._fsc([]).strip() == "1"


def test_bench_blocks_refuses_data_it_would_have_replaced_with_random_bytes(monkeypatch):
    """Any --data but passkey was timed as random bytes under its own name."""
    from tools import bench_blocks

    for bad in (["--data", "shakespeare"], ["--repeats", "0"]):
        with pytest.raises(SystemExit) as e:
            bench_blocks.main(bad)
        assert e.value.code == 2


@pytest.mark.parametrize("tool, args", [
    ("bench_train", ["--steps", "10,10"]), ("bench_train", ["--steps", "60"]),
    ("bench_train", ["--rounds", "0"]), ("bench_decode", ["--new", "1"]),
    ("bench_decode", ["--repeats", "0"]), ("bench_harness", ["--rounds", "0"]),
    ("bench_layout", ["--rounds", "0"]), ("bench_moe", ["--repeats", "0"]),
    ("bench_store", ["--repeats", "0"]), ("bench_store", ["--rows", "x"]),
    ("stress_store", ["--writers", "0"]), ("retrieval", ["--seeds", "x"]),
    ("retrieval", ["--jobs", "0"]), ("reach", ["--seeds", "0,x"]), ("reach", ["--samples", "0"]),
    ("quality", ["--seeds", "-1"]), ("quality", ["--jobs", "0"]),
])
def test_a_bad_count_is_refused_by_argparse_before_any_work(tool, args, capsys):
    module = importlib.import_module(f"tools.{tool}")
    with pytest.raises(SystemExit) as e:
        module.options(args) if hasattr(module, "options") else module.main(args)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"python -m tools.{tool}: error: ") and "Traceback" not in err


def test_bench_train_takes_a_long_and_a_short_run():
    assert bench_train.steps_pair("110,10") == (110, 10)


def test_a_per_recipe_value_that_is_no_number_is_one_line():
    for argv in (["--train-steps", "abc"], ["--lr", "passkey_attn=x"]):
        with pytest.raises(SystemExit, match=f"^{argv[0]} '{argv[1]}': expected one value, or "
                           "RECIPE=VALUE"):
            retrieval.options(argv)


def test_quality_trains_the_scorer_and_the_ar_row_whenever_seed_0_is_asked():
    """--seeds 1,0 once left them out (only a first seed of 0 trained them), and seed 0's
    genppl then had no scorer."""
    tags = [j.tag for j in quality.jobs(quality.options(["--seeds", "1,0"]))]
    assert quality.SCORER in tags and quality.AR in tags and "quality_attn-s1" in tags


def test_stress_store_without_a_compiler_says_so(monkeypatch, capsys):
    from tools import delay_lock, stress_store

    monkeypatch.setattr(delay_lock, "available", lambda: False)
    with pytest.raises(SystemExit) as e:
        stress_store.main(["--rounds", "1", "--delay-lock", "50"])
    assert e.value.code == 2 and "needs Linux and a C compiler" in capsys.readouterr().err


@pytest.mark.parametrize("error, code", [(UsageError("--seq-len 64 is too short"), 2),
                                         (StoreError("cannot open store x"), 1)])
def test_the_tools_boundary_turns_a_library_error_into_one_line(error, code, capsys,
                                                                 monkeypatch):
    monkeypatch.delenv("FSC_DEBUG", raising=False)

    def main():
        raise error

    with pytest.raises(SystemExit) as e:
        boundary(main, "python -m tools.x")
    assert e.value.code == code
    assert capsys.readouterr().err == f"python -m tools.x: {error}\n"

