"""Short causal depthwise convolution over a block with a cached window."""

OP = "causal_conv_block"  # fsc.ops name; reference.causal_conv_block_ref is the spec, triton.causal_conv_block the kernel
