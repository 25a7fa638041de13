"""The store as a researcher first meets it (docs/store.md): what `fsc query`, `fsc runs` and
the store's upgrades do with runs of every kind, stores of other fsc versions and odd rows."""

import json
import os

from fsc.provenance import environment
from fsc.store import Store, migrations


def _said(res) -> str:
    return " ".join(res.stderr.split())


def _train_and_eval(st: Store) -> tuple[str, str]:
    """A finished train run with one logged step and a finished eval run with one cell."""
    train = st.start_run("train", "fsc train tiny_attn", None, {"recipe": "tiny_attn"})
    st.add_rows("train_steps", train, [{"recipe": "tiny_attn", "step": 1, "loss": 2.5}])
    st.finish_run(train)
    ev = st.start_run("eval", "fsc eval ckpt", None, {"recipe": "tiny_attn"})
    st.add_rows("eval_cells", ev, [{"task": "niah", "length": 128, "n": 2, "correct": 1}])
    st.finish_run(ev)
    return train, ev


def test_a_write_that_leaves_training_steps_or_eval_cells_without_their_run_is_refused(
        store_path, fsc):
    st = Store(store_path)
    _train_and_eval(st)
    for kind in ("train", "eval"):
        res = fsc("query", "--write", "--yes", f"delete from runs where kind = '{kind}'")
        assert res.returncode == 2, res.stderr
        assert "nothing changed" in _said(res) and "without their run" in _said(res)
    _, [(runs, steps, cells)] = st.query("select (select count(*) from runs), "
                                         "(select count(*) from train_steps), "
                                         "(select count(*) from eval_cells)")
    assert (runs, steps, cells) == (2, 1, 1)
    # removing the rows with their run is whole, and goes through
    res = fsc("query", "--write", "--yes", "delete from eval_cells; "
              "delete from runs where kind = 'eval'")
    assert res.returncode == 0, res.stderr


def test_a_store_of_a_newer_fsc_refuses_writes_after_a_read(two_runs, fsc):
    st, (finished, _, _) = two_runs
    newer = len(migrations.MIGRATIONS) + 1
    st.query(f"insert into schema_migrations values ({newer}, 'from_a_newer_fsc', now())",
             write=True)
    for args in (("runs", "rm", finished, "--yes"),
                 ("query", "--write", "--yes", "delete from samples")):
        res = fsc(*args)  # each reads the store first (the run id, the SQL's statements)
        assert res.returncode != 0
        assert f"schema is version {newer}" in _said(res) and "upgrade fsc" in _said(res)
    _, [(runs, samples)] = Store(st.dir).query(
        "select (select count(*) from runs), (select count(*) from samples)")
    assert (runs, samples) == (3, 10)


def test_an_older_store_fsc_may_not_write_says_how_to_upgrade_it(store_path, fsc, monkeypatch):
    with monkeypatch.context() as older:
        older.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:4])
        Store(store_path).start_run("profile", "fsc profile", None, {})
    file = store_path / "fsc.duckdb"
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
        False if mode & os.W_OK and os.fspath(path) == os.fspath(file)
        else access(path, mode, **kw)))
    for args in (("runs",), ("query", "select step, loss from training")):
        res = fsc(*args)
        assert res.returncode != 0
        said = _said(res)
        assert "schema is version 4 of" in said and "may not write the file" in said, said
        assert ('fsc query --write "select 1", run by a user who may write it, upgrades it'
                in said)
    res = fsc("query", "select count(*) from runs", "--csv")  # what it has, it reads
    assert res.returncode == 0 and res.stdout.split() == ["count_star()", "1"]


def test_query_out_with_json_prints_the_file_and_refuses_another_format(two_runs, fsc,
                                                                        tmp_path):
    out = tmp_path / "points.parquet"
    res = fsc("query", "select * from profile", "--out", out, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == {"path": str(out), "bytes": out.stat().st_size}
    for given in (("--csv",), ("--format", "csv"), ("--format", "table")):
        other = tmp_path / "points.json"
        res = fsc("query", "select * from profile", "--out", other, *given)
        assert res.returncode == 2
        assert f"drop {' '.join(given)}" in _said(res) and "(.json)" in _said(res)
        assert not other.exists()


def test_show_a_run_whose_config_is_not_json_or_whose_id_has_a_quote(two_runs, fsc):
    st, (finished, _, _) = two_runs
    st.query(f"update runs set config = 'sweep of 3 points' where run_id = '{finished}'",
             write=True)
    res = fsc("runs", "show", finished)
    assert res.returncode == 0, res.stderr
    assert "config sweep of 3 points" in " ".join(res.stdout.split())
    res = fsc("runs", "show", finished, "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["config"] == "sweep of 3 points"
    env = st.register_environment(environment("cpu"))  # (--write keeps a run's environment)
    st.query("insert into runs (run_id, kind, status, started_at, config, env_id) values "
             f"('o''brien-1', 'bench', 'finished', now()::timestamp, '{{\"a\": 1}}', '{env}')",
             write=True)
    res = fsc("runs", "show", "o'brien")
    assert res.returncode == 0, res.stderr
    assert "run o'brien-1 (bench)" in " ".join(res.stdout.split())
    assert 'config {"a": 1}' in " ".join(res.stdout.split())


def test_rm_counts_each_kind_of_row_in_words(store_path, fsc):
    train, _ = _train_and_eval(Store(store_path))
    res = fsc("runs", "rm", train, "--yes")
    assert res.returncode == 0, res.stderr
    assert (f"removed run {train}: 0 points, 0 samples, 0 benchmark figures, 1 training step, "
            "0 eval cells") in _said(res)


def test_sql_that_begins_with_a_comment_is_told_where_to_go(store_path, fsc):
    """`fsc query "-- note\\nselect 1"` said "No such option: -- note\\nselect 1"; it is told to
    come after `--`, where it runs."""
    Store(store_path).start_run("profile", "fsc profile", None, {})
    res = fsc("query", "-- note\nselect 41 + 1 as x")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert ("'-- note select 41 + 1 as x' was read as an option: text that begins with '-' goes "
            "after `--`, the options before it") in _said(res)
    assert "42" in fsc("query", "--csv", "--", "-- note\nselect 41 + 1 as x").stdout


def test_a_write_that_leaves_runs_without_environment_or_rows_without_recipe_is_refused(
        store_path, fsc):
    """`delete from environments` and `delete from recipes` went through: every run's
    provenance and recipe text was gone, and the report dropped its roofline figure."""
    from fsc.provenance import environment
    from fsc.recipe import load_recipe

    st = Store(store_path)
    r = load_recipe("tiny_attn")
    st.register_recipe("tiny_attn", r.recipe_hash, r.to_yaml(), r.layer_plan)
    env = st.register_environment(environment("cpu"))
    run = st.start_run("profile", "fsc profile -r tiny_attn", env, {"recipes": ["tiny_attn"]})
    st.add_point(run, {"recipe": "tiny_attn", "recipe_hash": r.recipe_hash, "S": 64, "B": 1},
                 {"step": [1.0]})
    st.finish_run(run)
    before = st.query("select (select count(*) from environments), (select count(*) from "
                      "recipes)")[1]
    for sql, said in (("delete from environments", "1 run without its environment"),
                      ("delete from recipes", "1 row without its recipe"),
                      # a NULL went through: the run's provenance was as gone
                      ("update runs set env_id = null", "1 run without its environment"),
                      ("update profile_points set recipe_hash = null", "1 row without its recipe"),
                      ("update runs set kind = 'bogus'", "1 run without its kind (profile, "
                       "bench, train, eval)")):
        res = fsc("query", "--write", "--yes", sql)
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        assert f"nothing changed: the statements would leave {said}" in _said(res)
    assert st.query("select env_id, kind from runs")[1] == [(env, "profile")]
    assert st.query("select (select count(*) from environments), (select count(*) from "
                    "recipes)")[1] == before
    res = fsc("runs", "rm", run, "--yes")  # the run removed first, its provenance may go
    assert res.returncode == 0, res.stderr
    res = fsc("query", "--write", "--yes", "delete from environments; delete from recipes")
    assert res.returncode == 0, res.stderr
