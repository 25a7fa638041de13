import torch


def _scan(q, k, v, g, h):
    """h_t = exp(g_t) ⊙ h_{t-1} + k_t v_tᵀ; o_t = q_t h_t. Returns o (B, G, H, Dv) and last h."""
    outs = []
    for t in range(q.shape[1]):
        h = torch.exp(g[:, t])[..., None] * h + k[:, t, ..., None] * v[:, t, :, None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], h))
    return torch.stack(outs, dim=1), h


def gla_block_ref(q, k, v, gk, state, scale: float, new_state=None):
    """GLA block: forward scan from the cached state, backward scan inside the block.

    q, k:      [B, G, H, Dk]
    v:         [B, G, H, Dv]
    gk:        [B, G, H, Dk]   log forget gates (<= 0), one per key dimension
    state:     [B, H, Dk, Dv]  forward state after the prefix (state_dtype); not changed
    scale:     applied to q
    new_state: or None; receives the forward state after the block (the fold; may alias).
    returns    [B, G, H, Dv] in q.dtype:
               o_t = q_t·h_t (forward) + q_t·h'_t (reversed, from zero) - (q_t·k_t) v_t
    """
    qf, kf, vf, gf = q.float() * scale, k.float(), v.float(), gk.float()
    of, h_last = _scan(qf, kf, vf, gf, state.float())
    ob, _ = _scan(qf.flip(1), kf.flip(1), vf.flip(1), gf.flip(1), torch.zeros_like(h_last))
    diag = (qf * kf).sum(-1, keepdim=True) * vf
    if new_state is not None:
        new_state.copy_(h_last)
    return (of + ob.flip(1) - diag).to(q.dtype)
