"""The schema as it exists (a store's catalog, or a fresh in-memory migration), described."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from fsc.store.connect import connect
from fsc.store.migrations import MIGRATIONS, ROW_VIEWS, add_columns, migrate
from fsc.store.schema import SCHEMA, Column
from fsc.store.store import Store


def _catalog(con: duckdb.DuckDBPyConnection) -> tuple[int, dict[str, tuple[str, list]]]:
    version = con.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] or 0
    kinds = dict(
        con.execute(
            "SELECT table_name, CASE table_type WHEN 'VIEW' THEN 'view' ELSE 'table' END"
            " FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
    )
    relations: dict[str, tuple[str, list]] = {name: (kind, []) for name, kind in kinds.items()}
    for table, column, dtype in con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall():
        relations[table][1].append((column, dtype))
    return version, relations


def describe(store: Store,
             declared: Mapping[str, Sequence[Column]] | None = None) -> dict[str, Any]:
    """Tables, views and columns with their types and descriptions.

    Reads the store's own catalog when the store exists (read-only); otherwise migrates an
    in-memory database and adds the `declared` columns of each row table (an eval task's
    own, see fsc.store.schema.Column), so the answer is the schema a new store would get once
    every task has written. The declared columns' descriptions are theirs, in the table and
    its view. Relations and columns that nothing documents are listed with a null description.
    """
    declared = declared or {}
    if store.exists():
        with connect(store.file, read_only=True, timeout_s=store.timeout_s) as con:
            version, relations = _catalog(con)
    else:
        with duckdb.connect(":memory:") as con:
            migrate(con)
            for table, columns in declared.items():
                add_columns(con, table, columns)
            version, relations = _catalog(con)
    notes = {name: dict(SCHEMA[name].columns) for name in SCHEMA}
    for table, columns in declared.items():
        for relation in (table, ROW_VIEWS[table][0]):
            notes[relation].update({c.name: c.description for c in columns})
    names = [n for n in SCHEMA if n in relations] + sorted(set(relations) - set(SCHEMA))
    out = []
    for name in names:
        kind, columns = relations[name]
        doc = SCHEMA.get(name)
        out.append({
            "name": name,
            "kind": kind,
            "description": doc.description if doc else None,
            "columns": [{"name": c, "type": t, "description": notes.get(name, {}).get(c)}
                        for c, t in columns],
        })
    return {
        "store": str(store.file) if store.exists() else None,
        "schema_version": version,
        "code_version": len(MIGRATIONS),
        "relations": out,
    }


def to_markdown(doc: dict[str, Any]) -> str:
    """The described schema as Markdown: one heading and column table per relation."""
    parts = []
    for rel in doc["relations"]:
        parts.append(f"### `{rel['name']}` ({rel['kind']})\n\n{rel['description'] or ''}\n")
        parts.append("| column | type | description |\n| --- | --- | --- |")
        parts.extend(
            f"| `{c['name']}` | {c['type']} | {c['description'] or ''} |" for c in rel["columns"]
        )
        parts.append("")
    return "\n".join(parts)
