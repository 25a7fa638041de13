"""DuckDB store: migrations, writes with retry, read-only queries."""
