"""A store path that cannot hold a store is one clear line and exit 2, before any work."""

import os

import pytest

from fsc.errors import StorePathError
from fsc.store import Store

COMMANDS = [
    ["query", "select 1"],
    ["query", "--write", "create table t (a int)"],
    ["export", "select 1", "--out", "{tmp}/x.csv"],
    ["runs"],
    ["runs", "rm", "x", "--yes"],
    ["runs", "close", "x"],
    ["schema"],
    ["schema", "--json"],
]


def _args(command, tmp_path):
    return [a.format(tmp=tmp_path) for a in command]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("how", ["env", "option"])
def test_a_file_is_not_a_store(cli, monkeypatch, tmp_path, command, how):
    not_a_dir = tmp_path / "passwd"
    not_a_dir.write_text("root:x:0:0\n")
    if how == "env":
        monkeypatch.setenv("FSC_STORE", str(not_a_dir))
        extra = []
    else:
        extra = ["--store", str(not_a_dir)]
    result = cli(*_args(command, tmp_path), *extra)
    assert result.code == 2, result
    assert result.err == (f"error: store {not_a_dir} is not a directory (--store and $FSC_STORE "
                          "name the folder that holds fsc.duckdb)\n")
    assert result.out == "" and not_a_dir.read_text() == "root:x:0:0\n"
    assert not (tmp_path / "x.csv").exists()


def test_schema_of_etc_passwd_is_not_a_new_store(cli):
    result = cli("schema", "--store", "/etc/passwd")
    assert result.code == 2 and "a new store" not in result.out
    assert "is not a directory" in result.err


def test_a_folder_under_a_file(cli, tmp_path):
    (tmp_path / "f").write_text("")
    result = cli("query", "--write", "create table t (a int)", "--store", tmp_path / "f" / "s")
    assert result.code == 2
    assert result.err.startswith(f"error: store {tmp_path / 'f' / 's'} cannot be created: ")


@pytest.mark.parametrize("content", [b"", b"not a database at all\n" * 10, b"\0" * 8 + b"SQLi"])
def test_a_file_that_is_not_duckdb(cli, store_path, snapshot, content):
    store_path.mkdir()
    (store_path / "fsc.duckdb").write_bytes(content)
    before = snapshot(store_path)
    for command in COMMANDS:
        result = cli(*_args(command, store_path.parent))
        assert result.code == 2, (command, result)
        assert result.err == f"error: store {store_path / 'fsc.duckdb'} is not a DuckDB database file\n"
    assert snapshot(store_path) == before


def test_a_directory_named_like_the_file(cli, store_path):
    (store_path / "fsc.duckdb").mkdir(parents=True)
    result = cli("runs")
    assert result.code == 2 and result.err.endswith("fsc.duckdb is not a file\n")


def test_check_passes_a_missing_or_good_store(store_path, two_runs):
    st, _ = two_runs
    st.check(write=True)
    missing = Store(store_path.parent / "new" / "deeper")
    missing.check(write=False)
    missing.check(write=True)
    assert not missing.dir.exists()


def test_an_unwritable_folder(store_path, monkeypatch, cli):
    """os.access decides, so this also runs as root (where chmod does not stop writes)."""
    store_path.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if p == store_path and mode & os.W_OK
                        else real(p, mode))
    result = cli("query", "--write", "create table t (a int)")
    assert result.code == 2
    assert result.err == f"error: store {store_path}: {store_path} is not writable\n"
    with pytest.raises(StorePathError):
        Store(store_path).check(write=True)
    Store(store_path).check(write=False)  # reading needs no write access


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod")
def test_an_unwritable_folder_for_real(store_path, cli):
    store_path.mkdir()
    store_path.chmod(0o500)
    try:
        result = cli("query", "--write", "create table t (a int)")
    finally:
        store_path.chmod(0o700)
    assert result.code == 2 and "is not writable" in result.err


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize("command", [("build", "tiny_attn", "--save", "ck"),
                                     ("query", "--write", "create table t (a int)")])
def test_a_store_in_a_folder_no_file_can_be_made_in_is_refused_first(cli, tmp_path,
                                                                    monkeypatch, command):
    """os.access says yes to root in /proc: `fsc build --save ck --store /proc/x` (as `fsc
    push` and `fsc pull`) wrote the checkpoint, then failed to record it."""
    monkeypatch.chdir(tmp_path)
    result = cli(*command, "--store", "/proc/fsc-store")
    assert result.code == 2 and result.err.count("\n") == 1, result.err
    assert result.err.startswith("error: store /proc/fsc-store: ")
    assert not (tmp_path / "ck").exists()


@pytest.mark.parametrize("command", [
    ["profile", "-r", "tiny_attn", "--S", "16", "--B", "1", "--repeats", "1", "--warmup", "0"],
    ["runs"], ["query", "select 1"], ["build", "tiny_attn", "--save", "ck"],
], ids=lambda c: c[0])
def test_an_empty_store_is_refused_not_read_as_the_current_folder(fsc_main, tmp_path, command):
    """`--store "$DIR"` of an unset DIR: the profile wrote fsc.duckdb into the current folder,
    and runs and query read it there."""
    res = fsc_main(*command, "--store", "")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "'--store': empty; give a path, or leave --store out" in res.stderr
    assert list(tmp_path.iterdir()) == []
