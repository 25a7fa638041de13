"""`fsc export` and `fsc query --out`: the result lands in the named file and nowhere else."""

import csv
import json

import duckdb
import pytest

SQL = 'select point_id, recipe, "S", step_ms, layer_plan from profile order by point_id'


@pytest.fixture
def out_dir(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    return d


def _read(path):
    """Rows of an exported file as tuples of (point_id, recipe, S, step_ms)."""
    if path.suffix == ".parquet":
        with duckdb.connect() as con:
            return [r[:4] for r in con.execute(f"select * from read_parquet('{path}')").fetchall()]
    if path.suffix == ".csv":
        rows = list(csv.reader(path.open()))
        assert rows[0] == ["point_id", "recipe", "S", "step_ms", "layer_plan"]
        return [(int(a), b, int(c), float(d)) for a, b, c, d, _ in rows[1:]]
    text = path.read_text()
    records = json.loads(text) if path.suffix == ".json" else [
        json.loads(line) for line in text.splitlines()]
    if path.suffix == ".jsonl":
        assert len(text.splitlines()) == len(records) and text.endswith("\n")
    return [(r["point_id"], r["recipe"], r["S"], r["step_ms"]) for r in records]


@pytest.mark.parametrize("command", ["export", "query"])
@pytest.mark.parametrize("ext", ["parquet", "csv", "json", "jsonl"])
def test_each_format_round_trips_and_only_the_file_is_written(two_runs, cli, out_dir, ext,
                                                               command):
    st, _ = two_runs
    expected = [r[:4] for r in st.query(SQL)[1]]
    out = out_dir / f"result.{ext}"
    result = cli(command, SQL, "--out", out)
    assert result.code == 0, result.err
    assert result.out == "" and result.err.startswith(f"wrote {out} (")
    assert _read(out) == expected
    assert [p.name for p in out_dir.iterdir()] == [out.name]  # no temp file or folder left


def test_json_writes_non_finite_numbers_as_null(two_runs, cli, out_dir):
    sql = "select 'nan'::double as x, 'inf'::double as y, 1.5::double as z, [1.0, 'nan'::double] as l"
    for ext in ("json", "jsonl"):
        out = out_dir / f"x.{ext}"
        assert cli("export", sql, "--out", out).code == 0
        text = out.read_text()
        assert "NaN" not in text and "Infinity" not in text
        record = json.loads(text)[0] if ext == "json" else json.loads(text)
        assert record == {"x": None, "y": None, "z": 1.5, "l": [1.0, None]}


def test_an_empty_result_is_a_valid_file(two_runs, cli, out_dir):
    for ext in ("json", "jsonl", "csv", "parquet"):
        out = out_dir / f"empty.{ext}"
        assert cli("export", "select * from runs where false", "--out", out).code == 0
    assert json.loads((out_dir / "empty.json").read_text()) == []
    assert (out_dir / "empty.jsonl").read_text() == ""


def test_an_existing_file_needs_force(two_runs, cli, out_dir):
    out = out_dir / "result.csv"
    out.write_text("keep me\n")
    for command in ("export", "query"):
        result = cli(command, SQL, "--out", out)
        assert result.code == 2 and result.err == f"error: --out {out}: exists; pass --force to replace it\n"
        assert out.read_text() == "keep me\n"
    result = cli("export", SQL, "--out", out, "--force")
    assert result.code == 0, result.err
    assert len(_read(out)) == 4
    assert [p.name for p in out_dir.iterdir()] == [out.name]


@pytest.mark.parametrize(("name", "message"), [
    ("nodir/result.csv", "does not exist"),
    ("result.xlsx", "unknown extension '.xlsx'"),
    ("result", "unknown extension '(none)'"),
])
def test_bad_targets_are_refused_before_any_work(two_runs, cli, out_dir, name, message):
    for command in ("export", "query"):
        result = cli(command, SQL, "--out", out_dir / name)
        assert result.code == 2 and message in result.err and result.err.count("\n") == 1
    assert list(out_dir.iterdir()) == []


def test_standard_output_is_pointed_to_fsc_query(two_runs, cli):
    for out in ("-", "/dev/stdout"):
        result = cli("export", SQL, "--out", out)
        assert result.code == 2 and result.err.count("\n") == 1
        assert result.err.endswith("(for standard output: fsc query SQL --csv, or --format json)\n")


def test_a_directory_is_not_a_target(two_runs, cli, out_dir):
    (out_dir / "d.csv").mkdir()
    result = cli("export", SQL, "--out", out_dir / "d.csv", "--force")
    assert result.code == 2 and "is a directory" in result.err


@pytest.mark.parametrize("sql", [
    "delete from runs",
    "copy runs to '{d}/runs.csv'",
    "select * from read_csv('/etc/passwd')",
    "select * from glob('{d}/*')",
    "select 1; select 2",
    "",
])
def test_export_runs_only_one_read_only_query_in_the_sandbox(two_runs, cli, out_dir, snapshot,
                                                             sql):
    st, _ = two_runs
    before = snapshot(st.dir)
    result = cli("export", sql.format(d=out_dir), "--out", out_dir / "x.csv")
    assert result.code == 2 and result.err.startswith("error: ")
    assert snapshot(st.dir) == before
    assert list(out_dir.iterdir()) == []  # the private folder is gone too


def test_query_out_does_not_combine_with_write(two_runs, cli, out_dir):
    result = cli("query", "select 1", "--out", out_dir / "x.csv", "--write")
    assert result.code == 2 and "drop --write" in result.err


def test_export_json_names_the_file_and_its_size(two_runs, cli, out_dir):
    out = out_dir / "r.csv"
    result = cli("export", SQL, "--out", out, "--json")
    assert result.code == 0 and result.err == ""
    assert json.loads(result.out) == {"path": str(out), "bytes": out.stat().st_size}
