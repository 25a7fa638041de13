"""Bidirectional Mamba-2 (per-head scalar decay) block scan."""

OP = "mamba_block_scan"  # fsc.ops name; reference.mamba_block_scan_ref is the spec, triton.mamba_block_scan the kernel
