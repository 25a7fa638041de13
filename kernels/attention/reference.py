import torch
import torch.nn.functional as F


def _after_prefix(blk, cache, S: int) -> bool:
    """Whether `blk` is the view of `cache` just after its first S positions."""
    return (blk.dtype == cache.dtype and blk.stride() == cache.stride() and S < cache.shape[1]
            and blk.data_ptr() == cache[:, S].data_ptr())


def block_attention_ref(q, k_cache, v_cache, k_blk, v_blk, S: int, scale: float):
    """G block queries against S cached keys plus the block's own G keys (bidirectional).

    q:        [B, G, H, D]
    k_cache:  [B, C, Hkv, D]   capacity C >= S; only the first S positions are read
    v_cache:  [B, C, Hkv, D]
    k_blk:    [B, G, Hkv, D]   the block's keys (already rotated): a tensor of its own, or (a
                               fold) the cache's view just after the prefix
    v_blk:    [B, G, Hkv, D]
    returns   [B, G, H, D] in q.dtype; softmax and accumulation in fp32 (one fused softmax
    attention, each query head reading its group's key head).
    """
    G = k_blk.shape[1]
    if _after_prefix(k_blk, k_cache, S) and _after_prefix(v_blk, v_cache, S):  # a fold's block,
        k, v = k_cache[:, : S + G], v_cache[:, : S + G]  # written already: read in place
    else:
        k, v = torch.cat([k_cache[:, :S], k_blk], dim=1), torch.cat([v_cache[:, :S], v_blk], dim=1)
    k, v = k.float().transpose(1, 2), v.float().transpose(1, 2)  # (B, Hkv, S+G, D)
    o = F.scaled_dot_product_attention(q.float().transpose(1, 2), k, v, scale=scale,
                                       enable_gqa=True)
    return o.transpose(1, 2).to(q.dtype)
