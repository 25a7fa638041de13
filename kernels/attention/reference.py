import torch


def block_attention_ref(q, k_cache, v_cache, k_blk, v_blk, S: int, scale: float):
    """G block queries against S cached keys plus the block's own G keys (bidirectional).

    q:        [B, G, H, D]
    k_cache:  [B, C, Hkv, D]   capacity C >= S; only the first S positions are read
    v_cache:  [B, C, Hkv, D]
    k_blk:    [B, G, Hkv, D]   the block's keys (already rotated), not yet in the cache
    v_blk:    [B, G, Hkv, D]
    returns   [B, G, H, D] in q.dtype; softmax and accumulation in fp32.
    """
    H = q.shape[2]
    hkv = k_blk.shape[2]
    k = torch.cat([k_cache[:, :S], k_blk], dim=1).float()  # (B, S+G, Hkv, D)
    v = torch.cat([v_cache[:, :S], v_blk], dim=1).float()
    k = k.repeat_interleave(H // hkv, dim=2)
    v = v.repeat_interleave(H // hkv, dim=2)
    scores = torch.einsum("bghd,bshd->bhgs", q.float(), k) * scale
    p = torch.softmax(scores, dim=-1)
    return torch.einsum("bhgs,bshd->bghd", p, v).to(q.dtype)
