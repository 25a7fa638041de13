"""Bidirectional Mamba-2 (per-head scalar decay) block scan."""
