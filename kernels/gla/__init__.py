"""Gated linear attention (per-key-dimension forget gate), both directions inside a block."""
