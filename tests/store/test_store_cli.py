"""`fsc query`, `fsc runs`, `fsc schema` through the real entry point."""

import csv
import json

import duckdb
import pytest
from typer.testing import CliRunner

from fsc.cli.main import app
from fsc.store import Store


@pytest.fixture
def filled(store_path):
    """A store with one finished run of three points."""
    st = Store(store_path)
    run_id = st.start_run("profile", "fsc profile", None, {})
    for s in (1024, 2048, 4096):
        st.add_point(run_id, {"recipe": "tiny", "S": s, "B": 2, "step_ms": s / 1000,
                              "layer_plan": ["attention", "mamba"]}, {"step": [1.0, 2.0]})
    st.finish_run(run_id)
    return st


def _snapshot(st: Store) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(st.dir.iterdir())}


@pytest.mark.parametrize("sql", [
    "insert into runs (run_id, kind, status, started_at) values ('x', 'k', 'running', now())",
    "delete from profile_points",
    "drop table samples",
    "create table scratch (a int)",
])
def test_query_is_read_only_by_default(filled, fsc, sql):
    before = _snapshot(filled)
    done = fsc("query", sql)
    assert done.returncode != 0
    assert done.stderr == "error: query is read-only; modify the store with fsc query --write\n"
    assert _snapshot(filled) == before


def test_query_write_modifies_the_store(filled, fsc):
    done = fsc("query", "--write", "--yes", "delete from profile_points where \"S\" = 1024")
    assert done.returncode == 0, done.stderr
    assert filled.query("select count(*) from profile_points")[1] == [(2,)]


@pytest.mark.parametrize("sql", ["selec 1", "select * from no_such_table", "select 1/'a'"])
def test_sql_errors_are_one_line(filled, fsc, sql):
    done = fsc("query", sql)
    assert done.returncode != 0
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


def test_query_without_a_store_fails_and_creates_nothing(store_path, fsc):
    done = fsc("query", "select 1")
    assert done.returncode != 0 and "no store" in done.stderr
    assert not store_path.exists()


def test_query_formats_on_stdout(filled):
    runner = CliRunner()
    sql = 'select "S", step_ms from profile order by "S"'
    as_json = runner.invoke(app, ["query", sql, "--format", "json"])
    assert json.loads(as_json.stdout) == [
        {"S": 1024, "step_ms": 1.024}, {"S": 2048, "step_ms": 2.048}, {"S": 4096, "step_ms": 4.096}
    ]
    as_csv = runner.invoke(app, ["query", sql, "--format", "csv"])
    assert as_csv.stdout.splitlines() == ["S,step_ms", "1024,1.024", "2048,2.048", "4096,4.096"]
    table = runner.invoke(app, ["query", sql])
    assert table.exit_code == 0 and "4096" in table.stdout and "step_ms" in table.stdout


@pytest.mark.parametrize("ext", ["csv", "json", "parquet"])
def test_query_out_round_trips(filled, tmp_path, ext):
    sql = 'select point_id, recipe, "S", "B", step_ms from profile order by point_id'
    _, expected = filled.query(sql)
    out = tmp_path / f"result.{ext}"
    done = CliRunner().invoke(app, ["query", sql, "--out", str(out)])
    assert done.exit_code == 0, done.output
    if ext == "json":
        back = [tuple(r.values()) for r in json.loads(out.read_text())]
    elif ext == "csv":
        rows = list(csv.reader(out.open()))
        assert rows[0] == ["point_id", "recipe", "S", "B", "step_ms"]
        back = [(int(a), b, int(c), int(d), float(e)) for a, b, c, d, e in rows[1:]]
    else:
        back = duckdb.sql(f"select * from read_parquet('{out}')").fetchall()
    assert back == expected


def test_query_out_unknown_extension(filled, fsc, tmp_path):
    done = fsc("query", "select 1", "--out", str(tmp_path / "result.xlsx"))
    assert done.returncode == 2 and "unknown extension" in done.stderr
    assert not (tmp_path / "result.xlsx").exists()


def test_runs_json(filled, fsc):
    done = fsc("runs", "--json", "--limit", "5")
    assert done.returncode == 0, done.stderr
    [run] = json.loads(done.stdout)
    assert (run["status"], run["process"], run["points_ok"], run["points_oom"]) == (
        "finished", None, 3, 0)


def test_schema_without_a_store(store_path):
    runner = CliRunner()
    doc = json.loads(runner.invoke(app, ["schema", "--json"]).stdout)
    assert doc["store"] is None
    assert "profile" in [r["name"] for r in doc["relations"]]
    assert "profile_points" in runner.invoke(app, ["schema"]).stdout
    assert "| `step_ms` |" in runner.invoke(app, ["schema", "--markdown"]).stdout
    assert not store_path.exists()


@pytest.mark.parametrize("command", ["query", "runs", "schema"])
def test_every_command_has_help(command):
    done = CliRunner().invoke(app, [command, "--help"])
    assert done.exit_code == 0
    assert "--store" in done.stdout and len(done.stdout.splitlines()) > 5


def test_fsc_schema_describes_the_eval_tasks_own_columns_from_their_declarations(store_path):
    from fsc.eval.columns import ALL
    from fsc.harness import COLUMNS

    res = CliRunner().invoke(app, ["schema", "--json"])
    assert res.exit_code == 0
    [cells] = [r for r in json.loads(res.stdout)["relations"] if r["name"] == "eval_cells"]
    described = {c["name"]: c["description"] for c in cells["columns"]}
    for column in (*ALL, *COLUMNS):
        assert described[column.name] == column.description
