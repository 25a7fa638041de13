"""A run named on the command line: its whole id, a prefix that names one run, or latest."""

import pytest

from fsc.errors import UsageError
from fsc.store import Store
from fsc.store.run_ids import resolve_run


def _shortest_unique_prefix(run: str, others: list[str]) -> str:
    return next(run[:n] for n in range(1, len(run) + 1)
                if not any(o.startswith(run[:n]) for o in others))


def test_prefixes_and_latest_name_runs(tmp_path, cli):
    st = Store(tmp_path)
    a = st.start_run("profile", "fsc profile", None, {})
    b = st.start_run("eval", "fsc eval", None, {})
    assert resolve_run(st, a) == a
    assert resolve_run(st, _shortest_unique_prefix(a, [b])) == a
    assert resolve_run(st, "latest") == b and resolve_run(st, "latest", "profile") == a
    with pytest.raises(UsageError, match="names 2 runs"):
        resolve_run(st, "2")  # every id starts with the year
    with pytest.raises(UsageError, match="no profile run 'nope'"):
        resolve_run(st, "nope", "profile")
    with pytest.raises(UsageError, match="no store"):
        resolve_run(Store(tmp_path / "empty"), "latest", "eval")
    r = cli("runs", "close", "latest", "--store", tmp_path)  # b: its process is this one
    assert r.code == 2 and "still running" in r.err and b in r.err
    r = cli("compare", "latest", "nope", "--store", tmp_path)
    assert r.code == 2 and "RUN_B: no profile run 'nope'" in r.err


def test_a_run_is_named_by_its_tail_and_latest_by_the_kind_needed(tmp_path, cli):
    """`fsc compare 3f35e7 latest`: the random tail `fsc runs` shows names a run as well as the
    start of its id, and latest is the newest run the command can use (a profile run here,
    though an eval run is newer)."""
    st = Store(tmp_path)
    a = st.start_run("profile", "fsc profile", None, {})
    b = st.start_run("profile", "fsc profile", None, {})
    e = st.start_run("eval", "fsc eval", None, {})
    tail = a.rpartition("-")[2]
    assert resolve_run(st, tail) == a and resolve_run(st, tail[:4]) == a
    assert resolve_run(st, e, "profile") == e  # a whole id: the command names what is wrong
    r = cli("compare", tail, "latest", "--store", tmp_path)
    assert r.code == 2 and f"runs {a} and {b} share no point" in r.err, r.err
    r = cli("compare", tail, e, "--store", tmp_path)
    assert r.code == 2 and f"run {e} is an eval run" in r.err, r.err
    r = cli("report", "latest", "--store", tmp_path, "--out", tmp_path / "r.html")
    assert r.code == 0 and e in (tmp_path / "r.html").read_text()  # latest of any kind
    from fsc.results import select

    assert select.pick_runs(st, select.PROFILE, ["latest", tail]) == [b, a]  # plot --run


def test_a_prefix_of_a_run_of_another_kind_says_its_kind(tmp_path, cli):
    """`fsc profile --resume 45295d` of an eval run: not 'no profile run', but what it is."""
    st = Store(tmp_path)
    e = st.start_run("eval", "fsc eval", None, {})
    st.finish_run(e, "interrupted")
    tail = e.rpartition("-")[2]
    r = cli("profile", "--resume", tail, "--store", tmp_path)
    assert r.code == 2 and f"--resume: '{tail}' names eval run {e}; this takes a profile run" \
        in r.err, r.err
    r = cli("profile", "--resume", e, "--store", tmp_path)
    assert r.code == 2 and f"run {e} is an eval run" in r.err, r.err
