"""Block attention against a KV cache."""

OP = "block_attention"  # fsc.ops name; reference.block_attention_ref is the spec, triton.block_attention the kernel
