"""DuckDB store: migrations, writes with retry, read-only queries."""

from fsc.store.schema import SCHEMA
from fsc.store.store import Store

__all__ = ["SCHEMA", "Store"]
