"""`fsc runs` (list, filters, dead runs), `fsc runs rm`, `fsc runs close`."""

import io
import json
import os
import subprocess
import sys

import pytest


def _dead_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def _running(st, pid: int) -> str:
    """A profile run marked running by process `pid`, with one point."""
    run_id = st.start_run("profile", "fsc profile -r tiny", None, {"recipes": ["tiny"]})
    st.add_point(run_id, {"recipe": "tiny", "S": 16, "B": 1, "ended_at": 1_000_000_000.0},
                 {"step": [1.0]})
    st.query(f"update runs set pid = {pid} where run_id = '{run_id}'", write=True)
    return run_id


def _runs(cli, *args) -> list[dict]:
    result = cli("runs", "--json", *args)
    assert result.code == 0, result.err
    return json.loads(result.out)


def _count(st, sql) -> int:
    return st.query(sql)[1][0][0]


def test_rm_removes_a_run_with_everything_it_measured(two_runs, cli):
    st, [a, b, c] = two_runs
    result = cli("runs", "rm", a, "--yes")
    assert result.code == 0, result.err
    assert "3 points, 9 samples, 0 benchmark figures" in result.err
    assert [r["run_id"] for r in _runs(cli)] == [c, b]
    assert _count(st, "select count(*) from profile_points") == 1  # run b's point
    assert _count(st, "select count(*) from samples") == 1
    assert cli("runs", "rm", c, "--yes").code == 0
    assert _count(st, "select count(*) from bench_results") == 0
    assert [r["run_id"] for r in _runs(cli)] == [b]


def test_rm_of_an_unknown_run(two_runs, cli, snapshot):
    st, _ = two_runs
    before = snapshot(st.dir)
    result = cli("runs", "rm", "nope", "--yes")
    assert result.code == 2 and result.err.startswith("error: no run 'nope' in ")
    assert snapshot(st.dir) == before


def test_rm_without_a_store_creates_none(store_path, cli):
    result = cli("runs", "rm", "nope", "--yes")
    assert result.code == 2 and "no store" in result.err
    assert not store_path.exists()


def test_rm_needs_yes_without_a_terminal(two_runs, cli, snapshot):
    st, [a, *_] = two_runs
    before = snapshot(st.dir)
    result = cli("runs", "rm", a)
    assert result.code == 2 and "pass --yes to confirm" in result.err
    assert snapshot(st.dir) == before


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("answer", "code", "left"), [("y\n", 0, 2), ("n\n", 1, 3)])
def test_rm_asks_at_a_terminal(two_runs, cli, monkeypatch, answer, code, left):
    st, [a, *_] = two_runs
    monkeypatch.setattr(sys, "stdin", _Terminal(answer))
    result = cli("runs", "rm", a)
    assert result.code == code
    assert f"remove run {a}" in result.err
    assert _count(st, "select count(*) from runs") == left


def test_rm_and_close_refuse_a_live_run(two_runs, cli):
    st, _ = two_runs
    live = _running(st, os.getpid())
    for args in (["rm", live, "--yes", "--force"], ["close", live, "--force"]):
        result = cli("runs", *args)
        assert result.code == 2 and "is still running" in result.err
    assert _runs(cli, "--status", "running")[0]["run_id"] == live


def test_a_dead_run_is_listed_dead_and_closes(two_runs, cli):
    st, [a, *_] = two_runs
    dead = _running(st, _dead_pid())
    table = cli("runs")
    assert table.code == 0
    line = next(x for x in table.out.splitlines() if dead in x)
    assert " dead " in line
    assert [r["run_id"] for r in _runs(cli, "--status", "dead")] == [dead]
    assert dead not in [r["run_id"] for r in _runs(cli, "--status", "running")]

    result = cli("runs", "close", dead)
    assert result.code == 0, result.err
    [run] = _runs(cli, "--status", "interrupted")
    assert (run["run_id"], run["process"]) == (dead, None)
    assert run["ended_at"] == "2001-09-09 01:46:40"  # its last point's end
    assert "ended without closing" in run["error"]
    assert _runs(cli, "--status", "dead") == []
    again = cli("runs", "close", dead)
    assert again.code == 2 and "has ended (interrupted); only a run still marked running" \
        in again.err
    assert cli("runs", "close", a).code == 2  # finished


def test_a_run_on_another_host_needs_force(two_runs, cli):
    st, _ = two_runs
    elsewhere = _running(st, os.getpid())
    st.query(f"update runs set host = 'elsewhere' where run_id = '{elsewhere}'", write=True)
    assert "running on elsewhere" in cli("runs").out
    result = cli("runs", "close", elsewhere)
    assert result.code == 2 and "pass --force" in result.err
    resumed = cli("profile", "--resume", elsewhere)  # a command with no --force of its own
    assert resumed.code == 2 and resumed.err.count("\n") == 1, resumed.err
    assert (f"if it is not, close it first: fsc runs close {elsewhere} --force"
            in " ".join(resumed.err.split()))
    assert cli("runs", "close", elsewhere, "--force").code == 0
    assert _runs(cli, "--status", "interrupted")[0]["run_id"] == elsewhere


def test_filters(two_runs, cli):
    _, [a, b, c] = two_runs
    assert [r["run_id"] for r in _runs(cli, "--kind", "bench")] == [c]
    assert [r["run_id"] for r in _runs(cli, "--kind", "profile")] == [b, a]
    assert [r["run_id"] for r in _runs(cli, "--status", "failed")] == [b]
    assert [r["run_id"] for r in _runs(cli, "--status", "finished")] == [c, a]
    assert [r["run_id"] for r in _runs(cli, "--recipe", "tiny")] == [a]  # by its points
    assert [r["run_id"] for r in _runs(cli, "--recipe", "recipes/other.yaml")] == [b]  # config
    assert [r["run_id"] for r in _runs(cli, "--limit", "1")] == [c]
    assert _runs(cli, "--recipe", "none", "--kind", "profile") == []
    assert cli("runs", "--recipe", "none").out == "no runs match\n"


@pytest.mark.parametrize("args", [["--limit", "0"], ["--limit", "x"], ["--status", "done"]])
def test_bad_options_exit_2(two_runs, cli, args):
    result = cli("runs", *args)
    assert result.code == 2 and result.err.startswith("error: ")
    assert result.err.count("\n") == 1


def test_the_store_may_be_given_before_the_subcommand(two_runs, cli, monkeypatch):
    st, [a, *_] = two_runs
    monkeypatch.delenv("FSC_STORE")
    assert cli("runs", "--store", st.dir, "rm", a, "--yes").code == 0
    assert cli("runs", "rm", a, "--yes", "--store", st.dir).code == 2  # gone


def test_markup_in_stored_text_is_shown_not_obeyed(two_runs, cli):
    st, [a, *_] = two_runs
    st.query(f"update runs set command = 'fsc [/bold] \x1b[31mred' where run_id = '{a}'",
             write=True)
    result = cli("runs", "--wide")  # the whole command, at any terminal width
    assert result.code == 0, result.err
    assert "[/bold]" in result.out and "\\x1b[31mred" in result.out
    assert "\x1b" not in result.out


@pytest.mark.parametrize("width", [80, 100])
def test_the_list_reads_at_a_narrow_terminal_and_whole_with_wide(two_runs, cli, monkeypatch,
                                                                width):
    """No header word is split, no run id or count is cut, the command is cut to one line
    with "…" (whole with --wide), no line is wider than the terminal."""
    from fsc.cli import common

    st, ids = two_runs
    long = "fsc profile " + " ".join(f"-r recipe_{i}" for i in range(30))
    st.query(f"update runs set command = '{long}' where run_id = '{ids[0]}'", write=True)
    monkeypatch.setattr(common.out, "width", width)
    r = cli("runs")
    lines = r.out.splitlines()
    assert max(len(line) for line in lines) <= width
    assert len(lines) == 1 + 3 + len(ids) + 1  # title, header (3 lines), rows, bottom rule
    for head in ("run_id", "kind", "status", "stored", "command"):
        assert head in r.out
    assert all(run_id in r.out for run_id in ids) and "…" in r.out and long not in r.out
    monkeypatch.setattr(common.out, "width", width)
    assert long in cli("runs", "--wide").out


@pytest.mark.slow
def test_columns_sets_the_width_of_a_pipe(two_runs, run_fsc):
    st, ids = two_runs
    st.query(f"update runs set command = '{'fsc profile -r x' * 20}' where run_id = '{ids[0]}'",
             write=True)
    r = run_fsc("runs", "--store", st.dir, env=dict(os.environ, COLUMNS="100"))
    assert r.returncode == 0 and max(len(line) for line in r.stdout.splitlines()) == 100


def test_each_kind_says_what_it_stored(tmp_path, cli):
    from fsc.store import Store

    st = Store(tmp_path)
    for kind, table, n in (("train", "train_steps", 3), ("eval", "eval_cells", 2)):
        run = st.start_run(kind, f"fsc {kind}", None, {})
        rows = [{"recipe": "r", "step": i} if kind == "train" else {"task": "loss", "length": i}
                for i in range(n)]
        st.add_rows(table, run, rows)
    shown = cli("runs", "--store", tmp_path).out
    assert "3 logged steps" in shown and "2 cells" in shown and " rows" not in shown


def test_show_says_why_a_run_failed(tmp_path, cli):
    from fsc.store import Store

    st = Store(tmp_path)
    run = st.start_run("eval", "fsc eval runs/qa --task genppl", None, {"task": "genppl"})
    st.add_rows("eval_cells", run, [{"task": "genppl", "length": 16}])
    st.finish_run(run, "failed", error="out of memory (tried to allocate 40000000000 bytes)")
    shown = cli("runs", "show", run[-6:], "--store", tmp_path)
    assert shown.code == 0, shown.err
    assert "out of memory (tried to allocate" in shown.out and "1 cell\n" in shown.out
    assert '"task": "genppl"' in shown.out and "failed" in shown.out
    doc = json.loads(cli("runs", "show", run, "--store", tmp_path, "--json").out)
    assert doc["error"].startswith("out of memory") and doc["config"] == {"task": "genppl"}
    listed = cli("runs", "--store", tmp_path, "--wide")
    assert "1 cell " in listed.out and "fsc runs show RUN_ID" in listed.err


def test_a_training_run_short_of_its_steps_says_where_it_ended(fsc_main, tmp_path):
    """`--stop-after` (or a stop) ends a run `finished` short of --train-steps: `fsc runs`
    said only how many steps it logged; it says to which step of how many (a run that reached
    its steps says nothing more)."""
    common = ("--data", "copy", "--seq-len", "16", "--batch", "2", "--train-steps", "6",
              "--store", tmp_path / "st")
    fsc_main("train", "tiny_attn", *common, "--stop-after", "2", "--out", tmp_path / "a", check=0)
    fsc_main("train", "tiny_attn", *common, "--out", tmp_path / "b", check=0)
    res = fsc_main("runs", "--store", tmp_path / "st", "--json", check=0)
    got = {r["command"].split("--out ")[1].split()[0]: r for r in json.loads(res.stdout)}
    assert (got[str(tmp_path / "a")]["last_step"], got[str(tmp_path / "a")]["steps"]) == (2, 6)
    text = " ".join(fsc_main("runs", "--store", tmp_path / "st", "--wide", check=0).stdout.split())
    assert "2 logged steps, to step 2 of 6" in text  # steps 1 and 2
    assert text.count("to step") == 1


def test_an_interrupted_run_is_noted_not_called_an_error_and_set_variants_match(tmp_path, cli):
    """`fsc runs show` filed a Ctrl-C under "error"; `fsc runs --recipe tiny_mamba` left out the
    eval of tiny_mamba changed by --set (stored as tiny_mamba+mamba.decay_scale=0.5)."""
    from fsc.store import Store

    st = Store(tmp_path)
    run = st.start_run("train", "fsc train tiny_attn", None, {"recipe": "tiny_attn"})
    st.finish_run(run, "interrupted", error="interrupted at step 53 by SIGINT")
    shown = cli("runs", "show", run, "--store", tmp_path).out
    assert "note     interrupted at step 53 by SIGINT" in shown and "error" not in shown
    changed = st.start_run("eval", "fsc eval", None, {"recipe": "tiny_mamba+mamba.decay_scale=0.5"})
    plain = st.start_run("profile", "fsc profile", None, {"recipes": ["tiny_mamba", "x"]})
    other = st.start_run("eval", "fsc eval", None, {"recipe": "tiny_mamba2"})
    for r in (changed, plain, other):
        st.finish_run(r)
    found = [r["run_id"] for r in _runs(cli, "--recipe", "tiny_mamba", "--store", tmp_path)]
    assert sorted(found) == sorted([changed, plain])
    found = _runs(cli, "--recipe", "tiny_mamba+mamba.decay_scale=0.5", "--store", tmp_path)
    assert [r["run_id"] for r in found] == [changed]
