"""`fsc query` reaches the store and nothing else: every way out is refused in one line, exit 2,
with the store's bytes unchanged; --write keeps the store whole."""

import json

import duckdb
import pytest

from fsc.store.connect import connect
from fsc.store.sandbox import READ_ONLY_MESSAGE, destructive


@pytest.fixture
def outside(tmp_path):
    """Real, readable files outside the store (so a refusal is the sandbox's, not a missing
    file's), and paths a statement might try to create."""
    d = tmp_path / "outside"
    d.mkdir()
    with duckdb.connect(str(d / "other.db")) as con:
        con.execute("create table t as select 42 as a")
        con.execute(f"copy t to '{d / 'data.parquet'}' (format parquet)")
        con.execute(f"copy t to '{d / 'data.csv'}' (format csv, header)")
        con.execute(f"copy t to '{d / 'data.json'}' (format json)")
    (d / "ext.duckdb_extension").write_bytes(b"not an extension")
    return d


# Each reaches outside the store: files, extensions, other databases, the settings.
OUTSIDE = {
    "copy_to": "copy (select 1) to '{d}/x.csv'",
    "copy_table_to": "copy runs to '{d}/runs.parquet' (format parquet)",
    "copy_from": "copy runs from '{d}/data.csv'",
    "export_database": "export database '{d}/dump'",
    "import_database": "import database '{d}'",
    "read_csv": "select * from read_csv('{d}/data.csv')",
    "read_csv_etc_passwd": "select * from read_csv('/etc/passwd')",
    "read_text": "select * from read_text('/etc/passwd')",
    "read_blob": "select * from read_blob('/etc/passwd')",
    "glob": "select * from glob('/*')",
    "read_json": "select * from read_json('{d}/data.json')",
    "parquet_scan": "select * from parquet_scan('{d}/data.parquet')",
    "read_parquet": "select * from read_parquet('{d}/data.parquet')",
    "replacement_scan_etc_passwd": "from '/etc/passwd'",
    "replacement_scan_csv": "select * from '{d}/data.csv'",
    "call_read_csv": "call read_csv('/etc/passwd')",
    "call_glob": "call glob('/*')",
    "sniff_csv": "select * from sniff_csv('{d}/data.csv')",
    "install_httpfs": "install httpfs",
    "load_httpfs": "load httpfs",
    "load_file": "load '{d}/ext.duckdb_extension'",
    "attach": "attach '{d}/other.db' as other",
    "attach_memory": "attach ':memory:' as scratch",
    "set_external_access": "set enable_external_access = true",
    "reset_external_access": "reset enable_external_access",
    "set_allowed_directories": "set allowed_directories = ['/']",
    "pragma_threads": "pragma threads = 1",
    "pragma_profiling_output": "pragma enable_profiling = 'json'",
    "set_temp_directory": "set temp_directory = '{d}/tmp'",
    "create_secret": "create secret (type s3, key_id 'k', secret 's')",
    "checkpoint": "checkpoint",
    "force_checkpoint": "force checkpoint",
    "vacuum": "vacuum",
    "update_extensions": "update extensions",
}
# Writes to the store: refused without --write with the read-only message.
WRITES = {
    "insert": "insert into runs (run_id, kind, status, started_at) values ('x', 'k', 'running', now())",
    "update": "update runs set status = 'failed'",
    "delete": "delete from profile_points",
    "truncate": "truncate samples",
    "drop": "drop table samples",
    "create": "create table scratch (a int)",
    "create_temp": "create temp table scratch (a int)",
    "create_view": "create view v as select 1",
    "alter": "alter table runs add column note varchar",
    "create_macro": "create macro m(x) as x",
}


def _refused(result, store_dir, before, snapshot):
    assert result.code == 2, result
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err
    assert result.out == ""
    assert snapshot(store_dir) == before


@pytest.mark.parametrize("sql", OUTSIDE.values(), ids=OUTSIDE.keys())
def test_every_way_out_is_refused(two_runs, outside, cli, snapshot, sql):
    st, _ = two_runs
    before, files = snapshot(st.dir), snapshot(outside)
    _refused(cli("query", sql.format(d=outside)), st.dir, before, snapshot)
    assert snapshot(outside) == files  # nothing written outside either


@pytest.mark.parametrize("sql", WRITES.values(), ids=WRITES.keys())
def test_writes_need_write(two_runs, cli, snapshot, sql):
    st, _ = two_runs
    before = snapshot(st.dir)
    result = cli("query", sql)
    _refused(result, st.dir, before, snapshot)
    assert result.err == f"error: {READ_ONLY_MESSAGE}\n"


@pytest.mark.parametrize("sql", [
    "select * from read_csv('{d}/data.csv')",
    "select * from read_text('/etc/passwd')",
    "call glob('/*')",
    "insert into runs select 'x', 'k', content, 'running', now(), null, null, null, null, null,"
    " null from read_text('/etc/passwd')",
    "copy runs to '{d}/runs.csv'",
    "attach '{d}/other.db' as other",
    "install httpfs",
    "set enable_external_access = true",
    "pragma threads = 1",
])
def test_write_mode_still_reaches_nothing_outside(two_runs, outside, cli, snapshot, sql):
    st, _ = two_runs
    before, files = snapshot(st.dir), snapshot(outside)
    _refused(cli("query", "--write", "--yes", sql.format(d=outside)), st.dir, before, snapshot)
    assert snapshot(outside) == files


# The connection alone (no statement check in front) refuses every way out, read-only or not.
SANDBOX_ALONE = ["copy_to", "export_database", "import_database", "read_csv", "read_text",
                 "read_blob", "glob", "read_json", "parquet_scan", "replacement_scan_csv",
                 "call_read_csv", "install_httpfs", "load_httpfs", "load_file", "attach",
                 "set_external_access", "set_allowed_directories", "pragma_threads",
                 "create_secret"]


@pytest.mark.parametrize("read_only", [True, False], ids=["read_only", "write"])
@pytest.mark.parametrize("name", SANDBOX_ALONE)
def test_the_sandboxed_connection_alone_refuses(two_runs, outside, snapshot, name, read_only):
    st, _ = two_runs
    files = snapshot(outside)
    with connect(st.file, read_only=read_only, sandbox=True) as con, \
            pytest.raises(duckdb.Error):
        con.execute(OUTSIDE[name].format(d=outside)).fetchall()
    assert snapshot(outside) == files


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandbox", "plain"])
@pytest.mark.parametrize("read_only", [True, False], ids=["read_only", "write"])
def test_no_progress_bar_reaches_stdout(two_runs, sandbox, read_only):
    """DuckDB's progress bar writes to stdout during a query slower than two seconds, into what
    `fsc query` prints: every connection has it off, and a sandbox cannot turn it back on."""
    st, _ = two_runs
    with connect(st.file, read_only=read_only, sandbox=sandbox) as con:
        assert con.execute("select current_setting('enable_progress_bar')").fetchone() == (False,)
        if sandbox:
            with pytest.raises(duckdb.Error):
                con.execute("SET enable_progress_bar = true")


def test_the_sandbox_still_reads_the_store(two_runs, cli):
    result = cli("query", "select count(*) as n from profile", "--json")
    assert result.code == 0, result.err
    assert result.out.split() == ["[", "{", '"n":', "4", "}", "]"]
    for sql in ("show tables", "describe runs", "summarize samples", "pragma table_info('runs')",
                "explain select * from profile", "pivot profile on recipe using count(*)",
                "from runs select kind", "values (1, 2)", "select * from pragma_version()"):
        assert cli("query", sql).code == 0, sql


@pytest.mark.parametrize("sql", ["", " ", ";", " ; ;", "\n\t", "/* nothing */", "/* a */ ;"])
def test_empty_sql_is_a_clear_error(two_runs, cli, sql):
    result = cli("query", sql)
    assert result.code == 2
    assert result.err.startswith("error: no SQL statement given")


def test_bad_sql_exits_2_in_one_line(two_runs, cli):
    for sql in ("selec 1", "select * from no_such_table", "select 1/'a'"):
        result = cli("query", sql)
        assert result.code == 2 and result.err.startswith("error: ")
        assert result.err.count("\n") == 1


def test_read_only_runs_one_statement(two_runs, cli, snapshot):
    st, _ = two_runs
    before = snapshot(st.dir)
    result = cli("query", "select 1; select 2")
    _refused(result, st.dir, before, snapshot)
    assert "2 statements given" in result.err


def test_destructive_kinds_come_from_the_parser():
    assert destructive("select 'delete from runs'; -- drop table runs") == []
    assert destructive("update runs set kind = 'x'; truncate samples; drop view profile") == [
        "DELETE", "DROP"]
    assert destructive("alter table runs add column a int") == ["ALTER"]


def _count(st, sql):
    return st.query(sql)[1][0][0]


def test_write_asks_for_yes_before_delete_drop_truncate_alter(two_runs, cli, snapshot):
    st, [a, *_] = two_runs
    before = snapshot(st.dir)
    for sql in (f"delete from profile_points where run_id = '{a}'", "truncate samples",
                "drop table if exists nothing", "alter table runs add column note varchar"):
        result = cli("query", "--write", sql)
        _refused(result, st.dir, before, snapshot)
        assert "pass --yes to confirm" in result.err
    assert cli("query", "--write", "update runs set command = 'x' where false").code == 0


def test_deleting_points_takes_their_samples(two_runs, cli):
    st, _ = two_runs
    result = cli("query", "--write", "--yes", "delete from profile_points where \"S\" >= 2048")
    assert result.code == 0, result.err
    assert _count(st, "select count(*) from profile_points") == 2
    # 4 samples of the two points left; none whose point is gone
    assert _count(st, "select count(*) from samples") == 4
    assert _count(st, "select count(*) from samples s anti join profile_points p"
                      " using (point_id)") == 0


def test_a_sample_of_no_point_is_refused_not_dropped_unsaid(two_runs, cli, snapshot):
    """`insert into samples` of a point that is not there said "Count 1" and the clean-up of
    removed points' samples dropped it; it is refused, and the store left as it was."""
    st, _ = two_runs
    had = _count(st, "select count(*) from samples")
    before = snapshot(st.dir)
    result = cli("query", "--write", "insert into samples select 123456 as point_id, "
                 "* exclude(point_id) from samples limit 1")
    _refused(result, st.dir, before, snapshot)
    assert "would add 1 sample of no point" in result.err
    assert cli("query", "--write", "insert into samples select point_id, * exclude(point_id) "
               "from samples limit 1").code == 0  # of a point there: kept
    assert _count(st, "select count(*) from samples") == had + 1


@pytest.mark.parametrize("sql", [
    "delete from runs where run_id = '{a}'",
    "delete from runs where kind = 'bench'",
    "update runs set run_id = 'renamed' where run_id = '{a}'",
    "drop table samples",
    "drop view profile",
    "alter table runs drop column error",
    "alter table profile_points rename to points",
    "create table keep as select 1; drop table runs",
])
def test_write_never_breaks_the_store(two_runs, cli, snapshot, sql):
    st, [a, *_] = two_runs
    st.migrate()
    before = snapshot(st.dir)
    result = cli("query", "--write", "--yes", sql.format(a=a))
    _refused(result, st.dir, before, snapshot)
    assert result.err.startswith("error: nothing changed: ")
    assert "fsc runs rm RUN_ID" in result.err


def test_write_runs_all_statements_in_one_transaction(two_runs, cli):
    st, _ = two_runs
    ok = cli("query", "--write", "create table notes (n int); insert into notes values (1), (2);"
                      " select sum(n) as total from notes", "--json")
    assert ok.code == 0, ok.err
    assert ok.out.split() == ["[", "{", '"total":', "3", "}", "]"]
    failed = cli("query", "--write", "insert into notes values (3); insert into notes values ('x')")
    assert failed.code == 2
    assert _count(st, "select count(*) from notes") == 2  # the first insert was rolled back
    for sql in ("begin", "commit", "set threads = 1"):
        assert cli("query", "--write", sql).code == 2
    # before DuckDB 2, a PIVOT parses as several statements; it is still one
    pivot = cli("query", "--write", "pivot (select recipe from profile) on recipe using count(*)",
                "--json")
    assert pivot.code == 0, pivot.err
    assert json.loads(pivot.out) == [{"other": 1, "tiny": 3}]

