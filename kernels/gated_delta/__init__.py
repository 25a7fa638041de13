"""Gated DeltaNet (the delta rule with a scalar per-head decay), both directions inside a block."""

OP = "gated_delta_block"  # fsc.ops name; reference.gated_delta_block_ref is the spec, triton.gated_delta_block the kernel
