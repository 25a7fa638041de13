"""The `fsc` command line: one module per command group, registered in `main`.

CLI modules import nothing heavy (torch, duckdb) at module level, so `fsc --help` starts fast:
heavy imports happen inside the command functions.
"""
