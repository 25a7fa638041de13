"""What the results and store commands print: a failing --where named as given, store values in
JSON as a program reads them, tables at a narrow terminal that never cut a run id or split a
recipe name."""

import json
import shutil
from pathlib import Path

import pytest

from fsc.cli import common
from fsc.store import Store

RECIPES = ("tiny_attn", "tiny_mamba")


def _flat(text: str) -> str:
    """Whitespace joined: rich wraps long lines at the console's width."""
    return " ".join(text.split())


def _point(recipe: str, G: int, K: int, dtype: str, step: float) -> dict:
    fold = 1.5 * step
    return {"recipe": recipe, "recipe_hash": f"hash-{recipe}", "S": 2**20, "B": 1024, "G": G,
            "K": K,
            "dtype": dtype, "backend": "auto", "device": "cpu", "step_ms": step,
            "step_ms_p10": step * 0.99, "step_ms_p90": step * 1.01, "fold_ms": fold,
            "fold_ms_p10": fold * 0.99, "fold_ms_p90": fold * 1.01,
            "tokens_per_s": G / (K * step + fold) * 1e3, "peak_bytes": 2**20}


@pytest.fixture(scope="module")
def _profiled_template(tmp_path_factory) -> tuple[Path, list[str]]:
    st = Store(tmp_path_factory.mktemp("profiled") / "store")
    runs = []
    for factor in (1.0, 120.0):
        run = st.start_run("profile", "fsc profile -r tiny_attn -r tiny_mamba", None, {})
        for recipe in RECIPES:
            for G, K, dtype in ((16, 8, "fp32"), (32, 16, "bf16")):
                st.add_point(run, _point(recipe, G, K, dtype, factor))
        st.finish_run(run)
        runs.append(run)
    return st.dir, runs


@pytest.fixture
def profiled(store_path, _profiled_template) -> tuple[Store, list[str]]:
    """Two finished profile runs of tiny_attn and tiny_mamba at S 1m, B 1024 over G, K and
    dtype (so that no column is the same in every row), B's steps 120 × A's; built once,
    copied for each test."""
    template, runs = _profiled_template
    shutil.copytree(template, store_path)
    return Store(store_path), list(runs)


def _plot(cli, tmp_path, *where):
    return cli("plot", "latency", "--out", tmp_path / "l.png",
               *(a for w in where for a in ("--where", w)))


def test_a_where_naming_no_column_is_quoted_with_the_columns_there_are(profiled, cli, tmp_path):
    r = _plot(cli, tmp_path, "recip = 'tiny_attn'")
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert (_flat(r.err) == "error: --where \"recip = 'tiny_attn'\": the profile view has no "
            "column recip; did you mean recipe or recipe_hash?")
    r = _plot(cli, tmp_path, "recipe = tiny_attn")
    assert r.code == 2 and "--where \"recipe = tiny_attn\": the profile view has no column " \
        "tiny_attn; it has recipe, layer_plan, S, B, G, K," in _flat(r.err)
    assert "a text value goes in single quotes: 'tiny_attn'" in _flat(r.err)
    assert not (tmp_path / "l.png").exists()


def test_of_several_wheres_the_one_that_fails_is_named(profiled, cli, tmp_path):
    r = _plot(cli, tmp_path, "B = 1", "recipe = 'it''s (odd'", "nosuch > 2")
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert _flat(r.err).startswith('error: --where "nosuch > 2": the profile view has no column '
                                   "nosuch; it has")
    r = _plot(cli, tmp_path, "S > 0", "S = 'many'")
    assert r.code == 2 and _flat(r.err) == ("error: --where \"S = 'many'\": Conversion Error: "
                                            "Could not convert string 'many' to INT64")


def test_a_where_that_does_not_parse_is_quoted(profiled, cli, tmp_path):
    r = _plot(cli, tmp_path, "B = 1", "S >")
    assert r.code == 2 and _flat(r.err) == ('error: --where "S >": not one SQL condition '
                                            '(syntax error at or near ">")')
    r = _plot(cli, tmp_path, "1 = 1; drop table runs")
    assert r.code == 2 and _flat(r.err) == ('error: --where "1 = 1; drop table runs": not one '
                                            "SQL condition (it holds more than one statement)")


TIMES = ("select timestamp '2026-12-07 07:39:33.500000' t, timestamptz '2026-12-07 07:39:33+02' tz,"
         " time '01:02:03.250' c, date '2026-12-07' d, interval 28 hours + interval 0.5 second i,"
         " -(interval 1 day + interval 1 second) back, interval 1 month m,"
         " [interval 2 seconds] l, {'at': timestamp '2026-01-01 00:00:00.25'} s")
JSON_ROW = {"t": "2026-12-07 07:39:33.5", "tz": "2026-12-07 05:39:33+00", "c": "01:02:03.25",
            "d": "2026-12-07", "i": 100800.5, "back": -86401, "m": 2592000, "l": [2],
            "s": {"at": "2026-01-01 00:00:00.25"}}


def test_json_writes_times_as_duckdb_and_intervals_in_seconds(store_path, cli, tmp_path):
    Store(store_path).query("select 1", write=True)  # the store exists
    r = cli("query", TIMES, "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out) == [JSON_ROW]
    for suffix in (".json", ".jsonl"):
        out = tmp_path / f"times{suffix}"
        assert cli("query", TIMES, "--out", out).code == 0
        text = out.read_text()
        assert (json.loads(text) if suffix == ".json" else
                [json.loads(line) for line in text.splitlines()]) == [JSON_ROW]
    csv = cli("query", TIMES, "--csv").out.splitlines()[1]
    assert csv.startswith("2026-12-07 07:39:33.5,2026-12-07 05:39:33+00,01:02:03.25,")


def test_csv_writes_times_inside_lists_and_structs_as_the_file_does(store_path, cli, tmp_path):
    Store(store_path).query("select 1", write=True)
    sql = ("select [timestamp '2026-01-01 00:00:00.5'] l, {'at': timestamptz '2026-01-01"
           " 00:00:00.25+00', 'c': time '01:00:00.5', 'took': interval 1 second} s")
    r = cli("query", sql, "--csv")
    assert r.code == 0, r.err
    assert r.out.splitlines()[1] == ('"[""2026-01-01 00:00:00.5""]","{""at"":""2026-01-01 '
                                     '00:00:00.25+00"",""c"":""01:00:00.5"",""took"":""00:00:01""}"')
    out = tmp_path / "nested.csv"
    assert cli("query", sql, "--out", out).code == 0
    assert out.read_text() == r.out


def test_a_blob_is_written_as_duckdb_writes_it_not_as_python_bytes(store_path, cli, tmp_path):
    Store(store_path).query("select 1", write=True)
    sql = "select from_hex('00ff415c220a7e') b"
    r = cli("query", sql, "--csv")
    assert r.out == "b\n\\x00\\xFFA\\x5C\\x22\\x0A~\n"
    out = tmp_path / "blob.csv"
    assert cli("query", sql, "--out", out).code == 0 and out.read_text() == r.out
    assert json.loads(cli("query", sql, "--json").out) == [{"b": "\\x00\\xFFA\\x5C\\x22\\x0A~"}]


@pytest.mark.parametrize("width", [60, 40, 30])
def test_runs_keeps_every_run_id_whole_at_a_narrow_terminal(profiled, cli, monkeypatch, width):
    _, runs = profiled
    monkeypatch.setattr(common.out, "width", width)
    r = cli("runs")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert all(any(run in line for line in lines) for run in runs), r.out
    assert "…" not in r.out and all(line.count("│") in (0, 3, 5) for line in lines[4:-1])
    if width >= 40:  # room for the id and the status: the table fits
        assert max(len(line) for line in lines) <= width
        assert "finished" in r.out


@pytest.mark.parametrize("width", [80, 60])
def test_compare_never_splits_a_recipe_name(profiled, cli, monkeypatch, width):
    """At 80 columns a column goes rather than a name fold ("tiny_m / amba"); at 60, where the
    points' own columns do not fit, the table is printed whole, wider than the terminal."""
    _, (a, b) = profiled
    monkeypatch.setattr(common.out, "width", width)
    r = cli("compare", a, b)
    assert r.code == 0, r.err
    rows = [line for line in r.out.splitlines() if line.startswith("│")]
    for recipe in RECIPES:
        assert sum(recipe in line for line in rows) == 2, r.out  # its two points, whole
    assert sum(line.split("│")[1].strip() == "" for line in rows) <= 1  # "geometric / mean"
    assert "…" not in r.out and "120.000×" in r.out and "verdict" in r.out
    if width == 80:
        assert max(len(line) for line in r.out.splitlines()) <= width
