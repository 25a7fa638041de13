import torch
import torch.nn.functional as F


def causal_conv_block_ref(x, window, weight, bias, new_window=None):
    """Depthwise causal conv of a block continuing from the cached window, then SiLU.

    x:          [B, G, C]        the block's inputs
    window:     [B, C, W-1]      the last W-1 inputs before the block (state_dtype)
    weight:     [C, W]
    bias:       [C] or None (no bias)
    new_window: [B, C, W-1] or None; when given it receives the window after the block
                (it may be `window` itself: the fold).
    returns     [B, G, C] in x.dtype
    """
    W = weight.shape[1]
    full = torch.cat([window.float(), x.transpose(1, 2).float()], dim=2)  # (B, C, W-1+G)
    # each output the sum over its W inputs (a block is a few tokens: this beats conv1d's set-up)
    y = (full.unfold(2, W, 1) * weight.float()[:, None, :]).sum(-1)  # (B, C, G)
    if bias is not None:
        y = y + bias.float()[:, None]
    if new_window is not None:
        new_window.copy_(full[:, :, full.shape[2] - (W - 1) :])
    return F.silu(y).transpose(1, 2).to(x.dtype)
