"""Short causal depthwise convolution over a block with a cached window."""
