import torch
import torch.nn.functional as F

FEATURE_MAPS = {
    "elu1": lambda t: F.elu(t) + 1.0,
    "relu": F.relu,
    "identity": lambda t: t,
}


def linear_block_ref(q, k, v, state, z_state, feature_map: str, eps: float,
                     new_state=None, new_z=None):
    """Block linear attention: every block query sees the prefix state and all block keys.

    q, k:      [B, G, H, r]     before the feature map φ
    v:         [B, G, H, Dv]
    state:     [B, H, r, Dv]    Σ φ(k) vᵀ over the prefix (fp32 in the model: nothing decays
                                these sums, so 16 bits would drift); not changed
    z_state:   [B, H, r]        Σ φ(k) over the prefix
    new_state, new_z: or None; receive the sums including the block (the fold; may alias).
    returns    [B, G, H, Dv] in q.dtype:
               φ(q)·(S + Σ_blk φ(k)vᵀ) / max(φ(q)·(z + Σ_blk φ(k)), eps)
    Sums and products in fp32 whatever the input dtypes.
    """
    phi = FEATURE_MAPS[feature_map]
    fq, fk, vf = phi(q.float()), phi(k.float()), v.float()
    S = state.float() + torch.einsum("bghr,bghd->bhrd", fk, vf)
    z = z_state.float() + fk.sum(dim=1)
    num = torch.einsum("bghr,bhrd->bghd", fq, S)
    den = torch.einsum("bghr,bhr->bgh", fq, z).clamp_min(eps)
    if new_state is not None:
        new_state.copy_(S)
    if new_z is not None:
        new_z.copy_(z)
    return (num / den[..., None]).to(q.dtype)
