"""`fsc query`, `fsc export` and the store as a researcher meets them a third time: a sweep's
layer plans read back from a CSV file, the words DuckDB runs alone, a table function called,
and --out given twice or naming a folder."""

import csv
import json

import pytest

from fsc.store import Store


def _said(res) -> str:
    return " ".join(res.stderr.split())


def _store(path) -> Store:
    """A store with one finished profile run of one point of a two-layer hybrid."""
    st = Store(path)
    run = st.start_run("profile", "fsc profile", None, {"recipes": ["h"]})
    st.add_point(run, {"recipe": "h", "S": 64, "B": 1, "step_ms": 1.5,
                       "layer_plan": ["attention", "mamba"]})
    st.finish_run(run)
    return st


def test_out_csv_writes_lists_and_structs_as_json_text_as_csv_does(store_path, fsc, tmp_path):
    """DuckDB's CSV writer wrote a layer plan as [attention, mamba], which no reader takes back
    and which `--csv` on stdout wrote as JSON: both now write JSON text, byte for byte."""
    _store(store_path)
    sql = ("select layer_plan, layer_plan as layer_plan, {'S': S, 'tags': ['a,b', 'c\"d']} s,"
           " map {'k': [1, 2]} m, NULL::int[] none, [1.5, NULL] f from profile")
    res = fsc("query", sql, "--csv")
    assert res.returncode == 0, res.stderr
    out = tmp_path / "plans.csv"
    assert fsc("export", sql, "--out", out).returncode == 0
    assert out.read_text() == res.stdout
    row = next(csv.DictReader(out.open()))
    assert json.loads(row["layer_plan"]) == json.loads(row["layer_plan_1"]) == ["attention",
                                                                                  "mamba"]
    assert json.loads(row["s"]) == {"S": 64, "tags": ["a,b", 'c"d']}
    assert json.loads(row["m"]) == {"k": [1, 2]} and row["none"] == ""
    assert json.loads(row["f"]) == [1.5, None]


def test_a_word_that_is_a_statement_runs_as_one(store_path, fsc):
    """A bare name reads as its table's rows, but show, describe, checkpoint and begin are
    statements by themselves: they were read as tables that do not exist."""
    _store(store_path)
    res = fsc("query", "show", "--csv")
    assert res.returncode == 0, res.stderr
    assert "profile_points" in res.stdout
    res = fsc("query", "--write", "checkpoint")
    assert res.returncode == 0, res.stderr
    res = fsc("query", "describe", "--csv")
    assert res.returncode == 0 and "profile_points" in res.stdout
    res = fsc("query", "begin")
    assert res.returncode == 2 and "BEGIN, COMMIT and ROLLBACK are not needed" in _said(res)
    res = fsc("query", "runs", "--csv")  # a table's name still reads its rows
    assert res.returncode == 0 and res.stdout.startswith("run_id,kind,")


def test_call_read_only_says_how_to_read_a_table_function(store_path, fsc, tmp_path):
    """CALL f() was refused as a write ("modify the store with fsc query --write"), though the
    user meant to read: it says why, and how to read the function."""
    _store(store_path)
    for command, extra, says in (("query", (), "CALL runs only with --write"),
                                 ("export", ("--out", tmp_path / "info.csv"),
                                  "fsc export does not run CALL")):
        res = fsc(command, "call pragma_table_info('runs')", *extra)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert says in _said(res) and "select from it: SELECT * FROM f(...)" in _said(res)
    res = fsc("query", "select * from pragma_table_info('runs')", "--csv")  # as it says
    assert res.returncode == 0 and res.stdout.splitlines()[1].startswith("0,run_id,VARCHAR")
    res = fsc("query", "--write", "call pragma_table_info('runs')", "--csv")
    assert res.returncode == 0 and res.stdout.splitlines()[1].startswith("0,run_id,VARCHAR")
    res = fsc("query", "checkpoint")  # a CALL too, and a write: the read-only message
    assert res.returncode == 2 and "query is read-only" in _said(res)


@pytest.mark.parametrize("command", ["export", "query"])
def test_out_given_twice_is_refused(store_path, fsc, tmp_path, command):
    """Only the second file was written, unsaid."""
    _store(store_path)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    res = fsc(command, "select 1", "--out", a, "--out", b)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "'--out': given 2 times" in _said(res) and "one command writes one file" in _said(res)
    assert not a.exists() and not b.exists()
    assert fsc(command, "select 1", "--out", a).returncode == 0 and a.exists()


def test_a_folder_as_out_is_named_as_one(store_path, fsc, tmp_path):
    """A folder was refused for its missing extension, as if a file had been named."""
    _store(store_path)
    folder = tmp_path / "exports"
    folder.mkdir()
    res = fsc("export", "profile", "--out", folder)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"--out {folder}: is a directory; name the file to write in it" in _said(res)
    assert list(folder.iterdir()) == []


def test_query_csv_writes_times_as_the_csv_file_does(store_path, fsc, tmp_path):
    """A run that ended at .753730 s was 07:39:33.753730 on stdout and 07:39:33.75373 in the
    file (DuckDB cuts the fraction's trailing zeros; a zone is +00, not +00:00), and a run's
    duration `1 day, 4:00:00` (Python's words) where the file says `1 day 04:00:00`."""
    _store(store_path)
    sql = ("select timestamp '2024-01-01 07:39:33.753730' t, timestamp '2024-01-01 00:00:00' z,"
           " timestamptz '2024-01-01 00:00:00.25+00' tz, time '01:02:03.500' c,"
           " date '2024-01-02' d, t - timestamp '2023-12-31 03:39:33' took,"
           " -(interval 1 day + interval 1 second) back, ended_at - started_at ran from runs")
    res = fsc("query", sql, "--csv")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[1].startswith(
        "2024-01-01 07:39:33.75373,2024-01-01 00:00:00,2024-01-01 00:00:00.25+00,01:02:03.5,"
        "2024-01-02,1 day 04:00:00.75373,-1 day -00:00:01,")
    out = tmp_path / "times.csv"
    assert fsc("export", sql, "--out", out).returncode == 0
    assert out.read_text() == res.stdout


@pytest.mark.parametrize(("args", "why"), [
    (["plot", "latency"], "one command writes one file"),
    (["report"], "one command writes one file"),
    (["train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "1"],
     "a run trains into one directory"),
])
def test_plot_report_and_train_refuse_a_second_out(fsc_main, tmp_path, args, why):
    """`fsc plot ... --out a.png --out b.png` wrote b.png alone, unsaid, where fsc query and
    fsc export refuse the second."""
    res = fsc_main(*args, "--out", tmp_path / "a.png", "--out", tmp_path / "b.png",
                   "--store", tmp_path / "st")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "'--out': given 2 times" in " ".join(res.stderr.split()) and why in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
