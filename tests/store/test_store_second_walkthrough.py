"""`fsc query`, `fsc export`, `fsc schema` and `fsc compare` as a researcher meets them a second
time: points a run measured twice, runs that share nothing, points lost in two ways, CSV fields
a program reads back, and options that do nothing where they are given."""

import json

from fsc.store import Store


def _said(res) -> str:
    return " ".join(res.stderr.split())


def _point(S: int, step: float | None, status: str = "ok", dtype: str = "fp32") -> dict:
    """A point of recipe r at (S, B 1, G 4, K 4) on the CPU; timed ±1 % when ok."""
    p = {"recipe": "r", "recipe_hash": "h", "S": S, "B": 1, "G": 4, "K": 4, "dtype": dtype,
         "backend": "auto", "device": "cpu", "status": status}
    if status != "ok":
        return p | {"error": "did not fit"}
    return p | {"step_ms": step, "step_ms_p10": 0.99 * step, "step_ms_p90": 1.01 * step,
                "fold_ms": step, "fold_ms_p10": 0.99 * step, "fold_ms_p90": 1.01 * step,
                "tokens_per_s": 4 / (5 * step) * 1e3, "peak_bytes": 1000}


def _run(st: Store, points: list[dict]) -> str:
    run = st.start_run("profile", "fsc profile", None, {"repeats": 5})
    for p in points:
        st.add_point(run, p)
    st.finish_run(run)
    return run


def _compare(fsc, *args):
    res = fsc("compare", *args, "--json")
    return res, json.loads(res.stdout) if res.stdout.strip() else None


def test_a_point_measured_twice_is_paired_in_order_whichever_run_is_b(store_path, fsc):
    """`fsc profile -r x -r x` measures each point twice: each is counted once, in A or in B."""
    st = Store(store_path)
    once = _run(st, [_point(256, 1.0)])
    twice = _run(st, [_point(256, 1.0), _point(256, 2.0)])
    res, doc = _compare(fsc, once, twice)
    assert res.returncode == 0, res.stderr
    assert len(doc["points"]) == 1 and doc["points"][0]["step_ratio"] == 1.0
    assert len(doc["only_a"]) == 0 and len(doc["only_b"]) == 1
    res, doc = _compare(fsc, twice, once)
    assert len(doc["points"]) == 1 and doc["points"][0]["step_ratio"] == 1.0
    assert len(doc["only_a"]) == 1 and len(doc["only_b"]) == 0


def test_runs_that_share_no_point_say_in_what_they_differ(store_path, fsc):
    st = Store(store_path)
    fp32 = _run(st, [_point(256, 1.0), _point(1024, 1.0)])
    bf16 = _run(st, [_point(256, 1.0, dtype="bf16")])
    empty = _run(st, [])
    res = fsc("compare", fp32, bf16)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "share no point" in _said(res) and "dtype: A fp32, B bf16" in _said(res)
    assert "S:" not in _said(res)  # S 256 is in both
    res = fsc("compare", fp32, empty)
    assert res.returncode == 2 and "B holds no point" in _said(res)


def test_fail_above_names_each_way_a_point_was_lost(store_path, fsc):
    st = Store(store_path)
    a = _run(st, [_point(1, 1.0), _point(2, 1.0), _point(3, 1.0)])
    b = _run(st, [_point(1, 1.0), _point(2, None, "oom"), _point(3, None, "error")])
    res = fsc("compare", a, b, "--fail-above", "1.05")
    assert res.returncode == 1
    said = _said(res)
    assert "2 point(s) ok in A are not ok in B: 1 oom, 1 error" in said, said
    assert "1 noise, 2 changed status" in " ".join(res.stdout.split())


def test_query_csv_writes_fields_as_the_csv_file_does(store_path, fsc, tmp_path):
    """NULL and '' stay apart, booleans are true and false, a name given twice is told apart:
    `--csv` on stdout and `--out FILE.csv` give the same bytes."""
    _run(Store(store_path), [])
    sql = ("select i, e, n, b, i as i from (values (1, '', NULL, true), (2, NULL, 'a,b', "
           "false), (3, 'say \"hi\"', 'x', NULL)) t(i, e, n, b) order by i")
    res = fsc("query", sql, "--csv")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[:2] == ["i,e,n,b,i_1", '1,"",,true,1']
    out = tmp_path / "rows.csv"
    assert fsc("export", sql, "--out", out).returncode == 0
    assert res.stdout == out.read_text()


def test_options_that_do_nothing_where_given_are_refused(store_path, fsc):
    _run(Store(store_path), [])
    for args, says in ((("query", "select 1", "--force"), "--force replaces the file --out"),
                       (("query", "select 1", "--yes"), "--yes confirms what --write runs"),
                       (("schema", "--json", "--markdown"), "--json and --markdown disagree")):
        res = fsc(*args)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, (args, res.stderr)
        assert says in _said(res) and res.stdout == ""


def test_fsc_export_refuses_sql_in_its_own_words(store_path, fsc, tmp_path):
    """fsc export shares fsc query's sandbox: its refusals spoke of --write, a read-only query
    and `fsc export` itself."""
    _run(Store(store_path), [])
    out = tmp_path / "x.csv"
    for sql, says in (("select 1; select 2", "2 statements given; fsc export writes the result "
                                             "of one"),
                      ("delete from runs", "fsc export writes the result of a read-only query"),
                      ("copy runs to 'y.csv'", "COPY is not run: fsc export writes the one "
                                               "file --out names"),
                      ("install httpfs", "INSTALL and LOAD are not run: fsc export")):
        res = fsc("export", sql, "--out", out)
        assert res.returncode == 2 and says in _said(res), res.stderr
        assert not out.exists()
    res = fsc("query", "select 1; select 2")  # fsc query keeps its own
    assert "a read-only query runs one (with --write" in _said(res)
