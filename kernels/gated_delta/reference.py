import torch


def _scan(q, k, v, g, beta, h, before_write: bool = False):
    """The gated delta rule token by token, in the order given (fp32):
    h ← exp(g_t) h;  u_t = beta_t (v_t - kᵀ_t h);  h ← h + k_t u_tᵀ;  o_t = q_tᵀ h, read after
    the write (or, `before_write`, after the decay alone).
    q, k (B, G, H, Dk), v (B, G, H, Dv), g and beta (B, G, H), h (B, H, Dk, Dv).
    Returns o (B, G, H, Dv) and the last h."""
    outs = []
    for t in range(q.shape[1]):
        h = torch.exp(g[:, t])[..., None, None] * h
        if before_write:
            outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], h))
        pred = torch.einsum("bhk,bhkv->bhv", k[:, t], h)  # what h recalls for key k_t
        u = beta[:, t, :, None] * (v[:, t] - pred)
        h = h + k[:, t, ..., None] * u[:, :, None, :]
        if not before_write:
            outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], h))
    return torch.stack(outs, dim=1), h


def gated_delta_block_ref(q, k, v, g, beta, state, scale: float, new_state=None):
    """Gated DeltaNet block: forward scan from the cached state, backward scan inside the block.

    q, k:      [B, G, H, Dk]   (the mixer L2-normalises them; used as given)
    v:         [B, G, H, Dv]
    g:         [B, G, H]       log decay (<= 0), one per head and token, fp32
    beta:      [B, G, H]       write strength in (0, 1), fp32
    state:     [B, H, Dk, Dv]  forward state after the prefix (fp32 or bf16); not changed
    scale:     applied to q
    new_state: or None; receives the forward state after the block (the fold; may alias state).
    returns    [B, G, H, Dv] in q.dtype:
               o_t = q_t·h_t (forward from the state, token t written)
                     + q_t·exp(g_t) h'_{t+1} (reversed from zero: the later tokens, decayed)
               Token t's own write is counted once, in the forward direction, as in the GLA
               and Mamba ops; with G = 1 this is the causal gated delta rule.
    """
    qf, kf, vf = q.float() * scale, k.float(), v.float()
    gf, bf = g.float(), beta.float()
    of, h_last = _scan(qf, kf, vf, gf, bf, state.float())
    ob, _ = _scan(qf.flip(1), kf.flip(1), vf.flip(1), gf.flip(1), bf.flip(1),
                  torch.zeros_like(h_last), before_write=True)
    if new_state is not None:
        new_state.copy_(h_last)
    return (of + ob.flip(1)).to(q.dtype)
