"""`fsc profile` in-process: bad options, store paths, dry runs, the CPU notice and tables that
fit the terminal."""

import io
import json
import subprocess
import sys

import pytest
from rich.console import Console

from fsc.cli import profile as profile_cli
from fsc.cli.main import main
from fsc.cli.profile_render import RESULT_COLUMNS, render_rows
from fsc.sweep_results import PointResult

TINY = ["-r", "tiny_attn", "--S", "16", "--B", "1", "--warmup", "0", "--repeats", "1"]

BAD = [  # (options, what the one line must name)
    (["--S", ""], ["--S", "empty"]),
    (["--S", "abc"], ["--S", "'abc'"]),
    (["--S", "16,,32"], ["--S", "'16,,32' has an empty entry"]),
    (["--S", "99999999"], ["--S", "99999999"]),
    (["--B", "1e9"], ["--B", "'1e9'"]),
    (["--B", "5000"], ["--B", "5000"]),
    (["--B", "0"], ["--B", "0"]),
    (["--G", "0"], ["--G", "0"]),
    (["--G", "5000"], ["--G", "5000"]),
    (["--steps", "0"], ["--steps", "0"]),
    (["-r", "tiny_attn", "--steps", "99"], ["--steps 99", "G = 4"]),
    (["--mode", "ar", "--G", "4"], ["--mode ar", "--G"]),
    (["-r", "tiny_attn", "--mode", "ar", "--steps", "2"], ["--mode ar", "--steps"]),
    (["--repeats", "0"], ["--repeats", "0"]),
    (["--warmup", "-1"], ["--warmup", "-1"]),
    (["--memory-budget", "0"], ["--memory-budget", "'0'"]),
    (["--memory-budget", "-1"], ["--memory-budget", "'-1'"]),
    (["--memory-budget", "nan"], ["--memory-budget", "'nan'"]),
    (["--memory-budget", "inf"], ["--memory-budget", "'inf'"]),
    (["--memory-budget", "garbage"], ["--memory-budget", "'garbage'"]),
    (["--memory-budget", "1e400GiB"], ["--memory-budget", "'1e400GiB'"]),
    (["--bandwidth", "nan"], ["--bandwidth", "nan"]),
    (["--bandwidth", "inf"], ["--bandwidth", "inf"]),
    (["--bandwidth", "0"], ["--bandwidth", "0"]),
    (["--bandwidth", "-1"], ["--bandwidth", "-1"]),
    (["--bandwidth", "1e9"], ["--bandwidth", "1000000000"]),
    (["--dtype", "int8"], ["--dtype", "'int8'"]),
    (["--mode", "sideways"], ["--mode", "'sideways'"]),
    (["--backend", "foo"], ["--backend", "'foo'"]),
    (["--device", "tpu"], ["--device", "'tpu'"]),
    (["--resume", "nope"], ["nope"]),
    (["--resume", "nope", "--S", "16", "-r", "tiny_attn"], ["--resume", "--S", "--recipe"]),
]


@pytest.mark.parametrize("args, names", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_option_is_one_line_exit_2(tmp_path, capsys, args, names):
    assert main(["profile", *args, "--store", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert all(n in captured.err for n in names), captured.err
    assert not (tmp_path / "fsc.duckdb").exists()  # nothing recorded, nothing measured


def test_bad_options_are_refused_before_torch_is_imported():
    code = f"""
import sys
from fsc.cli.main import main
for args in {[a for a, _ in BAD if "--resume" not in a]!r}:
    assert main(["profile", *args]) == 2, args
assert "torch" not in sys.modules, "a bad option imported torch"
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("error: ") == len([a for a, _ in BAD if "--resume" not in a])


@pytest.mark.parametrize("kind", ["file", "missing"])
def test_a_store_path_that_holds_no_store_fails_before_measuring(tmp_path, capsys, monkeypatch, kind):
    path = tmp_path / "plain-file"
    if kind == "file":
        path.write_text("not a store")
    else:
        path = path / "below-a-file"
        (tmp_path / "plain-file").write_text("")

    def measured(*a, **k):
        raise AssertionError("a point was measured")

    monkeypatch.setattr("fsc.profile.measure_point", measured)
    monkeypatch.setenv("FSC_STORE", str(path))
    assert main(["profile", *TINY]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: store ") and err.count("\n") == 1 and "not a directory" in err


def test_dry_run_lists_points_and_records_nothing(tmp_path, capsys):
    rc = main(["profile", "-r", "tiny_attn", "-r", "tiny_mamba", "--S", "16,100000", "--B", "1,2",
               "--memory-budget", "1MiB", "--dry-run", "--json", "--store", str(tmp_path)])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["dry_run"] is True and doc["budget_bytes"] == 2**20
    got = {(p["recipe"], p["S"], p["B"], p["G"], p["K"]): p for p in doc["points"]}
    assert set(got) == {(r, S, B, 4, 4) for r in ("tiny_attn", "tiny_mamba")
                        for S in (16, 100000) for B in (1, 2)}
    # The cost model decides: attention's cache grows with S past the budget, Mamba's does not.
    assert got[("tiny_attn", 16, 1, 4, 4)]["fits"] and not got[("tiny_attn", 100000, 1, 4, 4)]["fits"]
    assert got[("tiny_mamba", 100000, 2, 4, 4)]["fits"]
    assert all(p["predicted_total_bytes"] > 0 and p["rough_s"] > 0 for p in doc["points"])
    assert doc["rough_s"] == pytest.approx(sum(p["rough_s"] for p in doc["points"]))
    assert not (tmp_path / "fsc.duckdb").exists()

    assert main(["profile", "-r", "tiny_attn", "--S", "16", "--B", "1", "--dry-run",
                 "--store", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "dry run: 1 point on cpu" in text and "tiny_attn" in text and "nothing is measured" in text
    assert not (tmp_path / "fsc.duckdb").exists()


def test_help_says_the_default_sweep_a_dry_run_lists(tmp_path, capsys):
    """`fsc profile --help` named the default recipes but not the default S and B; it says
    both devices' now, the lengths as --S takes them, and the CPU's are what a bare dry run
    lists."""
    assert main(["profile", "--help"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "Default: 1k,4k,16k,64k on CPU, 1k,4k,16k,64k,256k on a GPU." in said
    assert "Default: 1,4 on CPU, 1,2,4,8 on a GPU." in said
    assert main(["profile", "--dry-run", "--device", "cpu", "--json", "--store",
                 str(tmp_path)]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert sorted({p["S"] for p in points}) == [1024, 4096, 16384, 65536]
    assert sorted({p["B"] for p in points}) == [1, 4]


def test_a_3b_sweep_on_the_cpu_says_how_long_before_it_starts(tmp_path, capsys):
    assert main(["profile", "-r", "attn_3b", "--S", "1024,4096", "--B", "1", "--dry-run", "--json",
                 "--store", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    # Three billion parameters: minutes per point on one core, not milliseconds.
    assert len(doc["points"]) == 2 and doc["rough_s"] > 60


def test_cpu_notice_before_a_long_sweep(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(profile_cli, "CPU_NOTICE_S", 0)
    assert main(["profile", *TINY, "--device", "cpu", "--store", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "1 point, roughly" in err and "--resume continues" in err


def test_crossed_steps_leave_out_pairs_with_k_above_g(tmp_path, capsys):
    assert main(["profile", "-r", "tiny_attn", "--S", "16", "--B", "1", "--G", "2,4",
                 "--steps", "1,3", "--dry-run", "--json", "--store", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert [(p["G"], p["K"]) for p in json.loads(captured.out)["points"]] == [(2, 1), (4, 1), (4, 3)]
    assert "tiny_attn: (G, K) = (2, 3) left out: K must be at most G" in captured.err


def _row(name, S=1024, status="ok"):
    row = {"recipe": name, "layer_plan": ["attention"] if name == "attn" else ["mamba"], "S": S,
           "B": 1, "G": 4, "K": 4, "dtype": "fp32", "device": "cpu", "status": status,
           "cache_bytes": 123456, "mixer_backends": {"attention": "torch"},
           "recipe_hash": "0123456789abcdef", "backend": "auto"}
    if status != "ok":
        return PointResult(**row, error="needs 9 GiB [bold]but[/] \x1b[31m 1 GiB free")
    return PointResult(**row, step_ms=12.345, step_ms_p10=11.2, step_ms_p90=13.9, fold_ms=14.5,
                       tokens_per_s=123.0, peak_bytes=7654321, achieved_gbps=1.5,
                       floor_ms=0.123, roofline_fraction=0.01)


NAMES = ["attn", "hybrid_24_8_long_context_variant", "[/bold]odd[red]name"]
FOLLOW_UP = "fsc query \"select * from profile where run_id = '20250101T000000-abcdef'\""


def _render(width):
    rows = [_row(n, S) for n in NAMES for S in (1024, 262144)] + [_row(NAMES[1], 10**6, "oom")]
    console = Console(width=width, file=io.StringIO(), color_system=None)
    errors = Console(width=width, file=io.StringIO(), color_system=None)
    render_rows(rows, "20250101T000000-abcdef", "/a/store/fsc.duckdb", FOLLOW_UP, console, errors)
    return console.file.getvalue(), errors.file.getvalue()


def test_narrow_terminal_table_fits_and_keeps_names_whole():
    text, errors = _render(80)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines if line != FOLLOW_UP), text
    assert FOLLOW_UP in lines  # the query to copy is one line, never wrapped
    for name in NAMES:  # markup in a name prints as itself, never cut with an ellipsis
        assert any(name in line for line in lines), name
    assert "…" not in text and "step ms" in text and "tok/s" in text
    assert "p10–p90" not in text  # dropped first to make room
    assert "[bold]but[/]" in errors and "\\x1b[31m" in errors and "\x1b" not in errors


def test_wide_terminal_table_keeps_every_column():
    text, _ = _render(200)
    assert all(col in text for col in RESULT_COLUMNS)


def test_wide_keeps_every_column_on_a_narrow_terminal(tmp_path, monkeypatch, capsys):
    from fsc.cli import common

    args = ["profile", "-r", "tiny_mamba", "--S", "16", "--B", "1", "--repeats", "1",
            "--warmup", "0", "--device", "cpu", "--store", str(tmp_path / "s")]
    monkeypatch.setattr(common.out, "width", 60)
    assert main(args) == 0
    narrow = capsys.readouterr().out
    monkeypatch.setattr(common.out, "width", 60)
    assert main([*args, "--wide"]) == 0
    wide = capsys.readouterr().out
    for col in RESULT_COLUMNS:
        assert col in wide
    table = [line for line in narrow.splitlines() if line[:1] in "┏┃┡│└"]
    assert "floor ms" not in "".join(table), narrow
    assert max(len(line) for line in table) <= 60


def test_a_budget_takes_every_unit_up_to_its_bound():
    from fsc.cli.bounds import parse_bytes
    from fsc.errors import UsageError

    assert [parse_bytes(t) for t in ("1EiB", "2PiB", "3TiB", "1.5GB", "2TB", "1EB")] == [
        2**60, 2 * 2**50, 3 * 2**40, 1_500_000_000, 2 * 10**12, 10**18]
    with pytest.raises(UsageError, match="'2EiB' must be between 1MiB and 1EiB"):
        parse_bytes("2EiB")


def test_the_command_that_measures_the_baseline_writes_to_the_runs_store(fsc_main, tmp_path):
    """Attention out of memory at B 4 under the budget: the command the cost model suggests
    for its batch that fits names the store the sweep wrote to."""
    res = fsc_main("profile", "-r", "tiny_attn", "-r", "tiny_mamba", "--S", "4096", "--B", "4",
                   "--memory-budget", "3MiB", "--warmup", "0", "--repeats", "1", "--json",
                   "--store", tmp_path / "st")
    assert res.returncode == 0, res.stderr
    [x] = json.loads(res.stdout)["comparison"]
    assert x["baseline_command"].startswith("fsc profile -r tiny_attn --S 4096 --B 1 ")
    assert x["baseline_command"].endswith(f" --store {tmp_path / 'st'}")
