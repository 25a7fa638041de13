"""`fsc runs` as a researcher meets it after runs were stopped: options given where they do
nothing, killed training and eval runs, benchmark runs, a removal asked about a live run, a
resumed run, and the whole round of a training run killed outright."""

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fsc.jsonsafe import clock
from fsc.store import Store


def _said(text: str) -> str:
    return " ".join(text.split())


def _dead_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def _count(st: Store, sql: str) -> int:
    return st.query(sql)[1][0][0]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("before", "sub", "hint"), [
    (["--kind", "profile"], ["rm", "latest", "--yes"], "`fsc runs rm --help` lists what rm takes"),
    (["--status", "failed"], ["close", "latest"], "`fsc runs close --help`"),
    (["--json"], ["show", "latest"], "give it after the subcommand: fsc runs show ... --json"),
    (["--limit", "1"], ["show", "latest"], "`fsc runs show --help`"),
])
def test_the_lists_options_before_a_subcommand_are_refused(two_runs, cli, before, sub, hint):
    """`fsc runs --kind profile rm latest --yes` removed the newest run of any kind (a bench
    run here): the list's options were ignored by the subcommand after them."""
    st, [*_, c] = two_runs
    res = cli("runs", *before, *sub)
    assert res.code == 2 and res.err.count("\n") == 1, res.err
    assert f"{before[0]} is an option of the list (fsc runs), not of `fsc runs {sub[0]}`" \
        in _said(res.err) and hint in _said(res.err)
    assert _count(st, "select count(*) from runs") == 3
    assert _count(st, f"select count(*) from bench_results where run_id = '{c}'") == 1


def test_the_store_given_before_and_after_a_subcommand_must_agree(two_runs, cli, tmp_path,
                                                                  monkeypatch):
    """`fsc runs --store A show X --store B` read B without a word."""
    st, [a, *_] = two_runs
    other = Store(tmp_path / "other")
    other.finish_run(other.start_run("eval", "fsc eval", None, {}))
    monkeypatch.delenv("FSC_STORE")
    res = cli("runs", "--store", st.dir, "show", "latest", "--store", other.dir)
    assert res.code == 2 and "--store given twice" in _said(res.err)
    same = cli("runs", "--store", st.dir, "show", a, "--store", st.dir / ".." / st.dir.name)
    assert same.code == 0 and a in same.out


def _killed(st: Store, kind: str, table: str, rows: list[dict]) -> str:
    """A run of `kind` that stored `rows` into `table` from 00:00:00, the last at 00:00:30,
    whose process is gone."""
    run = st.start_run(kind, f"fsc {kind}", None, {})
    st.add_rows(table, run, rows)
    st.query(f"update runs set pid = {_dead_pid()}, started_at = '2026-01-01 00:00:00'"
             f" where run_id = '{run}'", write=True)
    st.query(f"update {table} set recorded_at = '2026-01-01 00:00:10' where run_id = '{run}'",
             write=True)
    st.query(f"update {table} set recorded_at = '2026-01-01 00:00:30' where run_id = '{run}'"
             f" and rowid = (select max(rowid) from {table} where run_id = '{run}')", write=True)
    return run


@pytest.mark.parametrize(("kind", "table", "rows"), [
    ("train", "train_steps", [{"recipe": "r", "step": 1}, {"recipe": "r", "step": 2}]),
    ("eval", "eval_cells", [{"task": "niah", "length": 64}, {"task": "niah", "length": 128}]),
])
def test_a_killed_training_or_eval_run_ends_at_its_last_row(store_path, cli, kind, table, rows):
    """A dead training or eval run was listed with no duration (`-`), and `fsc runs close` ended
    it at its start (0.0s): only profile points counted as its last row."""
    st = Store(store_path)
    run = _killed(st, kind, table, rows)
    [listed] = json.loads(cli("runs", "--json").out)
    assert (listed["process"], listed["duration_s"]) == ("dead", 30.0)
    assert "30.0s" in cli("runs", "--wide").out
    assert cli("runs", "close", run).code == 0
    [closed] = json.loads(cli("runs", "--json").out)
    assert (closed["status"], closed["ended_at"]) == ("interrupted", "2026-01-01 00:00:30")
    assert closed["duration_s"] == 30.0 and closed["rows_logged"] == 2


def test_a_benchmark_run_says_what_it_stored(two_runs, cli):
    """A bench run's stored column read `–` though it held a figure."""
    st, [*_, c] = two_runs
    st.add_bench(c, "decode.step_ms", 3.5, "ms")
    line = next(x for x in cli("runs", "--wide").out.splitlines() if c in x)
    assert "2 figures" in line
    assert json.loads(cli("runs", "show", c, "--json").out)["bench_figures"] == 2
    assert "stored   2 figures" in cli("runs", "show", c).out


def test_rm_refuses_a_live_run_before_it_asks(two_runs, cli, monkeypatch):
    """At a terminal, `fsc runs rm` asked to remove a live run, and refused it only after a yes."""
    st, _ = two_runs
    live = st.start_run("profile", "fsc profile", None, {})  # this process: alive
    monkeypatch.setattr(sys, "stdin", _Terminal("y\n"))
    res = cli("runs", "rm", live)
    assert res.code == 2 and "is still running" in res.err
    assert "remove run" not in res.err
    assert _count(st, "select count(*) from runs") == 4


def test_show_says_when_a_run_was_resumed(two_runs, cli):
    """A resumed run's pid is the resumer's: `fsc runs show` did not say it was resumed."""
    st, [a, b, _] = two_runs
    st.query(f"update runs set resumed_at = '2026-03-04 05:06:07' where run_id = '{a}'",
             write=True)
    shown = cli("runs", "show", a).out
    assert "resumed  2026-03-04 05:06:07 UTC" in shown
    assert "resumed" not in cli("runs", "show", b).out


@pytest.mark.parametrize("how", ["killed", "interrupted"])
def test_a_resumed_runs_duration_leaves_out_the_time_it_sat_stopped(store_path, cli, how):
    """A run stopped on 1 January and resumed today was listed as having taken eleven months:
    its duration held the time between its sessions. It now counts from its end (a killed
    run's: its last row) to the resume apart, as `stopped`."""
    st = Store(store_path)
    run = _killed(st, "eval", "eval_cells", [{"task": "niah", "length": 64}])
    if how == "interrupted":  # ended 10 s after its last row
        st.query(f"update runs set status = 'interrupted', ended_at = '2026-01-01 00:00:40'"
                 f" where run_id = '{run}'", write=True)
    st.resume_run(run, None, "eval")
    st.finish_run(run)
    [listed] = json.loads(cli("runs", "--json").out)
    worked = 30.0 if how == "killed" else 40.0  # to the end, or the last row, of session one
    assert worked <= listed["duration_s"] < worked + 10, listed
    [(stopped,)] = st.query(f"select stopped_s from runs where run_id = '{run}'")[1]
    assert stopped > 24 * 3600 and listed["stopped_s"] == stopped
    shown = _said(cli("runs", "show", run).out)
    assert "between its sessions (not in its duration)" in shown and "stopped" in shown


def test_show_prints_a_long_config_whole(tmp_path, cli):
    """`fsc runs show` prints one run whole, but cut its command and config at 4000
    characters with "…" (a sweep of many recipes, a harness run of many tasks)."""
    st = Store(tmp_path)
    tasks = [f"task_{i:04d}" for i in range(600)]
    run = st.start_run("eval", "fsc eval ck --tasks " + ",".join(tasks), None, {"tasks": tasks})
    st.finish_run(run)
    shown = cli("runs", "show", run, "--store", tmp_path).out
    assert "…" not in shown and "task_0599" in shown.split("config")[1]
    assert shown.split("command")[1].split("\n")[0].strip().endswith("task_0599")


@pytest.mark.slow
def test_a_training_run_killed_outright_is_dead_then_closed_at_its_last_step(tmp_path):
    """`fsc train` killed with SIGKILL: listed dead, with a duration; `fsc runs close` keeps its
    steps and ends it at the last one; a finished profile run beside it is left as it was."""
    store = tmp_path / "my store"
    env = dict(os.environ, FSC_STORE=str(store))
    fsc = [sys.executable, "-m", "fsc"]
    subprocess.run([*fsc, "profile", "-r", "tiny_attn", "--S", "64", "--B", "1", "--repeats",
                    "1", "--warmup", "0"], env=env, check=True, capture_output=True, timeout=120)
    st = Store(store)
    before = st.query("select * from profile_points")[1]
    proc = subprocess.Popen([*fsc, "train", "tiny_attn", "--data", "copy", "--seq-len", "16",
                             "--batch", "2", "--train-steps", "100000", "--log-every", "1", "--out",
                             str(tmp_path / "out a")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _count(st, "select count(*) from train_steps") < 3:
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    run = lambda *a: subprocess.run([*fsc, "runs", *a], env=env, capture_output=True,  # noqa: E731
                                    text=True, timeout=120)
    [dead] = json.loads(run("--json", "--kind", "train").stdout)
    assert dead["process"] == "dead" and dead["duration_s"] > 0
    assert run("close", dead["run_id"][-6:]).returncode == 0
    [closed] = json.loads(run("--json", "--kind", "train").stdout)
    last = st.query("select max(recorded_at) from train_steps")[1][0][0]
    assert closed["status"] == "interrupted" and closed["ended_at"] == clock(last)
    assert closed["rows_logged"] == _count(st, "select count(*) from train_steps") >= 3
    assert st.query("select * from profile_points")[1] == before


def test_a_run_into_a_store_that_cannot_be_made_is_one_line(tmp_path):
    """A run started where the store's folder cannot be made (a file there) says so in the
    store's words, not 'File exists'."""
    from fsc.errors import StorePathError

    (tmp_path / "e.txt").write_text("")
    with pytest.raises(StorePathError, match="is not a directory"):
        Store(tmp_path / "e.txt").start_run("bench", "x", None, {})


def test_a_bare_table_name_is_its_rows(two_runs, cli, tmp_path):
    """`fsc export runs --out F` and `fsc query runs` read the relation whole (DuckDB's
    parser said only 'syntax error at or near "runs"')."""
    r = cli("query", "runs", "--json")
    assert r.code == 0 and len(json.loads(r.out)) == 3
    r = cli("export", "runs", "--out", tmp_path / "runs.csv")
    assert r.code == 0 and len((tmp_path / "runs.csv").read_text().splitlines()) == 4
    r = cli("query", "nosuch")
    assert r.code == 2 and "nosuch does not exist" in r.err
