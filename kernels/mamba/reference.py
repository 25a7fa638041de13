import torch
import torch.nn.functional as F


def _scan(x, dt, a, Bm, state):
    """h_t = a_t h_{t-1} + dt_t x_t B_tᵀ over the G tokens; returns all h (fp32)."""
    hs = []
    h = state
    for t in range(x.shape[1]):
        h = a[:, t, :, None, None] * h + torch.einsum(
            "bh,bhp,bn->bhpn", dt[:, t], x[:, t], Bm[:, t]
        )
        hs.append(h)
    return torch.stack(hs, dim=1), h  # (B, G, H, P, N)


def _step(x, dt, a, Bm, Cm, D, z, state, new_state):
    """One token (G = 1): h = a h + dt x Bᵀ, y = C·h + D x, gated; x [B, H, P], dt and a
    [B, H], Bm and Cm [B, N]. Returns y [B, 1, H, P]."""
    write = (dt[..., None] * x)[..., None] * Bm[:, None, None, :]  # (B, H, P, N)
    h = torch.addcmul(write, state, a[..., None, None])
    y = torch.addcmul((h @ Cm[:, None, :, None]).squeeze(-1), D[:, None], x)
    if z is not None:
        y = y * F.silu(z[:, 0].to(y.dtype))
    if new_state is not None:
        new_state.copy_(h)
    return y[:, None]


def mamba_block_scan_ref(x, dt, dt_bias, A, Bm, Cm, D, z, state, new_state=None):
    """Mamba-2 block: forward scan from the cached state, backward scan inside the block.

    x:         [B, G, H, P]   conv'd inputs, P = mamba head_dim
    dt:        [B, G, H]      raw step sizes; softplus(dt + dt_bias) is applied here
    dt_bias:   [H]
    A:         [H]            negative decay rates (A = -exp(A_log)); a_t = exp(dt_t A); or
               [B, G, H]      each token's own (`mamba.decay_from`: scaled by position)
    Bm, Cm:    [B, G, N]      input and output projections of the state (one group)
    D:         [H]            skip
    z:         [B, G, H, P]   gate, y *= silu(z); or None
    state:     [B, H, P, N]   forward state after the cached prefix (state_dtype); not changed
    new_state: [B, H, P, N] or None; receives the forward state after the block (the fold;
               it may be `state` itself).
    returns    [B, G, H, P] in x.dtype

    y_t = C_t·h_t (forward, from `state`) + C_t·g_t (the same recurrence over the block
    reversed, from zero) - C_t·(dt_t x_t B_tᵀ) (the diagonal, counted once) + D x_t.
    With G = 1 this is the causal Mamba-2 step. Computed in fp32, or in fp64 when x is fp64
    (the tests' high-precision reference).
    """
    wide = torch.promote_types(x.dtype, torch.float32)
    xf, Bf, Cf = x.to(wide), Bm.to(wide), Cm.to(wide)
    dtf = F.softplus(dt.to(wide) + dt_bias.to(wide))
    a = torch.exp(dtf * A.to(wide))
    if x.shape[1] == 1:  # the backward term is the token's own write, the diagonal: a causal step
        return _step(xf[:, 0], dtf[:, 0], a[:, 0], Bf[:, 0], Cf[:, 0], D.to(wide), z, state.to(wide),
                     new_state).to(x.dtype)
    hf, h_last = _scan(xf, dtf, a, Bf, state.to(wide))
    zero = torch.zeros_like(state, dtype=wide)
    hb, _ = _scan(xf.flip(1), dtf.flip(1), a.flip(1), Bf.flip(1), zero)
    hb = hb.flip(1)
    diag = torch.einsum("bgh,bghp,bgn->bghpn", dtf, xf, Bf)
    y = torch.einsum("bghpn,bgn->bghp", hf + hb - diag, Cf) + D.to(wide)[:, None] * xf
    if z is not None:
        y = y * F.silu(z.to(wide))
    if new_state is not None:
        new_state.copy_(h_last)
    return y.to(x.dtype)
