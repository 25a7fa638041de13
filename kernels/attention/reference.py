import torch
import torch.nn.functional as F


def block_attention_ref(q, k_cache, v_cache, k_blk, v_blk, S: int, scale: float):
    """G block queries against S cached keys plus the block's own G keys (bidirectional).

    q:        [B, G, H, D]
    k_cache:  [B, C, Hkv, D]   capacity C >= S; only the first S positions are read
    v_cache:  [B, C, Hkv, D]
    k_blk:    [B, G, Hkv, D]   the block's keys (already rotated), not yet in the cache
    v_blk:    [B, G, Hkv, D]
    returns   [B, G, H, D] in q.dtype; softmax and accumulation in fp32 (one fused softmax
    attention, each query head reading its group's key head).
    """
    k = torch.cat([k_cache[:, :S], k_blk], dim=1).float().transpose(1, 2)  # (B, Hkv, S+G, D)
    v = torch.cat([v_cache[:, :S], v_blk], dim=1).float().transpose(1, 2)
    o = F.scaled_dot_product_attention(q.float().transpose(1, 2), k, v, scale=scale,
                                       enable_gqa=True)
    return o.transpose(1, 2).to(q.dtype)
