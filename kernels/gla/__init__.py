"""Gated linear attention (per-key-dimension forget gate), both directions inside a block."""

OP = "gla_block"  # fsc.ops name; reference.gla_block_ref is the spec, triton.gla_block the kernel
