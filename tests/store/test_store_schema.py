"""The migrated schema is exactly the documented one; migrations are recorded and idempotent."""

from pathlib import Path

import duckdb
import pytest

from fsc.cli.query import declared
from fsc.store import SCHEMA, Store
from fsc.store.catalog import describe, to_markdown
from fsc.store.migrations import MIGRATIONS, add_columns, migrate
from fsc.store.schema import Column

DECLARED = declared()  # the eval tasks' and the harness's own eval_cells columns

DOCS = Path(__file__).resolve().parents[2] / "docs" / "store.md"
REQUIRED_PROFILE_COLUMNS = [
    "run_id", "recipe", "recipe_hash", "S", "B", "G", "K", "dtype", "backend", "device",
    "status", "step_ms", "step_ms_p10", "step_ms_p90", "fold_ms", "tokens_per_s", "peak_bytes",
    "cache_bytes", "weight_bytes", "git_commit", "torch_version", "started_at",
    "predicted_step_bytes", "predicted_total_bytes", "floor_ms", "bound", "achieved_gbps",
    "roofline_fraction",
]


def _catalog(con) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for table, column in con.execute(
        "select table_name, column_name from information_schema.columns"
        " where table_schema = 'main' order by table_name, ordinal_position"
    ).fetchall():
        out.setdefault(table, []).append(column)
    return out


def test_fresh_store_has_exactly_the_documented_schema(store_path):
    st = Store(store_path)
    assert st.migrate() == [m.__name__ for m in MIGRATIONS]
    with duckdb.connect(str(st.file), read_only=True) as con:
        catalog = _catalog(con)
        views = {n for (n,) in con.execute(
            "select table_name from information_schema.tables where table_type = 'VIEW'"
            " and table_schema = 'main'").fetchall()}
    own = {c.name for c in DECLARED["eval_cells"]}
    assert set(catalog) == set(SCHEMA)
    for name, rel in SCHEMA.items():  # the documented columns, in order; besides them, only
        assert [c for c in catalog[name] if c in rel.columns] == list(rel.columns)  # declared
        assert set(catalog[name]) - set(rel.columns) <= (own if "eval" in name else set())
    assert views == {name for name, rel in SCHEMA.items() if rel.kind == "view"}
    for rel in SCHEMA.values():
        assert rel.description and all(d.strip() for d in rel.columns.values())


def test_a_declared_column_a_store_holds_has_its_declared_type(store_path):
    st = Store(store_path)
    st.migrate()
    with duckdb.connect(str(st.file), read_only=True) as con:
        types = dict(con.execute("select column_name, data_type from information_schema.columns"
                                 " where table_name = 'eval_cells'").fetchall())
    columns = DECLARED["eval_cells"]
    assert len({c.name for c in columns}) == len(columns)  # one declaration a name
    for c in columns:
        assert c.description.strip() and c.name not in SCHEMA["eval_cells"].columns
        assert types.get(c.name, c.type) == c.type, c.name


def test_a_new_declared_column_reaches_the_table_its_view_and_the_schema(store_path):
    """A new task's own column needs no migration: the first rows that carry it add it."""
    column = Column("sharpness", "DOUBLE", "toy: how sharp the answers were.")
    st = Store(store_path)
    with st.run("eval", "fsc eval", {}) as run:
        run.add_rows("eval_cells", [{"task": "toy", "length": 8, "n": 1, "sharpness": 0.5}],
                     (column,))
        run.add_rows("eval_cells", [{"task": "toy", "length": 16, "sharpness": 0.25}], (column,))
        with pytest.raises(ValueError, match="sharpness"):  # a column nothing declared
            run.add_rows("eval_cells", [{"task": "toy", "length": 8, "sharpness": 1.0}])
    _, rows = st.query("SELECT length, sharpness FROM evaluation ORDER BY length")
    assert rows == [(8, 0.5), (16, 0.25)]
    doc = describe(st, {"eval_cells": (column,)})
    for relation in ("eval_cells", "evaluation"):
        [rel] = [r for r in doc["relations"] if r["name"] == relation]
        assert {"name": "sharpness", "type": "DOUBLE",
                "description": "toy: how sharp the answers were."} in rel["columns"]
    fresh = describe(Store(store_path / "none"), {"eval_cells": (column,)})  # a new store's
    assert [r for r in fresh["relations"] if r["name"] == "evaluation"] == \
        [r for r in doc["relations"] if r["name"] == "evaluation"]


def test_profile_view_has_the_promised_columns():
    assert set(REQUIRED_PROFILE_COLUMNS) <= set(SCHEMA["profile"].columns)
    assert list(SCHEMA["profile"].columns)[5:9] == ["S", "B", "G", "K"]  # verbatim case


def test_migrations_twice_are_harmless(store_path):
    st = Store(store_path)
    st.migrate()
    run_id = st.start_run("profile", "cmd", None, {})
    assert st.migrate() == []
    assert Store(store_path).migrate() == []
    _, rows = st.query("select version, name from schema_migrations order by version")
    assert rows == [(i, m.__name__) for i, m in enumerate(MIGRATIONS, start=1)]
    _, [(kept,)] = st.query("select run_id from runs")
    assert kept == run_id


def test_migrate_in_one_connection_twice():
    with duckdb.connect(":memory:") as con:
        assert len(migrate(con)) == len(MIGRATIONS)
        assert migrate(con) == []


def test_describe_without_a_store_does_not_create_it(store_path):
    """Without a store: the schema a new store has once every task has written (its declared
    columns added as rows first carry them); a store describes its own columns."""
    doc = describe(Store(store_path), DECLARED)
    assert not store_path.exists()
    assert doc["store"] is None and doc["schema_version"] == len(MIGRATIONS)
    assert [r["name"] for r in doc["relations"]] == list(SCHEMA)
    Store(store_path).migrate()
    fresh = describe(Store(store_path), DECLARED)
    names = {r["name"]: {c["name"] for c in r["columns"]} for r in doc["relations"]}
    have = {r["name"]: {c["name"] for c in r["columns"]} for r in fresh["relations"]}
    unwritten = {"answers", "top_k", "min_p", "repetition_penalty", "uncarried",
                 "scorer_window", "data"}  # not yet written
    assert {n: names[n] - have[n] for n in names if names[n] != have[n]} == {
        "eval_cells": unwritten, "evaluation": unwritten}
    with duckdb.connect(str(Store(store_path).file)) as con:
        add_columns(con, "eval_cells", DECLARED["eval_cells"])
    existing = describe(Store(store_path), DECLARED)
    assert existing["relations"] == doc["relations"]


def test_docs_show_the_current_schema(store_path):
    """docs/store.md embeds `fsc schema --markdown`; regenerate it when the schema changes."""
    assert to_markdown(describe(Store(store_path), DECLARED)) in DOCS.read_text()


def test_a_measurement_added_to_profile_points_shows_in_the_profile_view():
    """The view is `p.*` plus the run's and environment's columns: a new measurement is one
    migration (ALTER TABLE), not a rewrite of the view."""
    con = duckdb.connect(":memory:")
    migrate(con)
    before = [d[0] for d in con.execute("select * from profile limit 0").description]
    con.execute("alter table profile_points add column energy_joules double")
    after = [d[0] for d in con.execute("select * from profile limit 0").description]
    assert "energy_joules" in after and len(after) == len(before) + 1


def test_a_store_an_older_fsc_wrote_is_upgraded_before_it_is_read(tmp_path, monkeypatch):
    """Its readers name today's columns (runs.resumed_at): the missing migrations run first."""
    from fsc.store import migrations

    old = migrations.MIGRATIONS[:-1]
    monkeypatch.setattr(migrations, "MIGRATIONS", old)
    older = Store(tmp_path)
    older.start_run("profile", "fsc profile", None, {})
    monkeypatch.undo()
    runs = Store(tmp_path).runs()  # a read
    assert len(runs) == 1 and "resumed_at" in runs[0]
    _, [(n,)] = Store(tmp_path).query("select count(*) from schema_migrations")
    assert n == len(migrations.MIGRATIONS)
