"""Block attention against a KV cache."""
