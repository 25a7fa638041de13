"""Linear attention with a feature map and a floored normaliser."""

OP = "linear_block"  # fsc.ops name; reference.linear_block_ref is the spec, triton.linear_block the kernel
