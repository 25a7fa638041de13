"""The training objectives against their definition in the references (MDLM, BD3-LM, LLaDA):
the `elbo` loss `fsc train` prints estimates the masked-diffusion bound per token, for both
denoising objectives, and the `masked` loss the mean it is documented to have (each checked
against the enumeration over every mask)."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from model_checks import mixing_model

from fsc.objective import (
    Batch,
    _frontier_terms,
    block_losses,
    draw_blocks,
    draw_frontier,
    frontier_loss,
)
from fsc.tokenizer import ByteTokenizer

MASK = ByteTokenizer.mask_id


@torch.no_grad()
def _by_count(m, tokens: torch.Tensor, target: torch.Tensor, G: int) -> list[float]:
    """c_l for l = 1..n: the mean over the masks of l of the last block's n supervised
    positions of (1/l) Σ masked CE, given the clean blocks before it (enumerated). The
    per-token bound is their mean."""
    start = tokens.shape[0] - G
    pos = [start + i for i in range(G) if target[start + i]]
    means = []
    for count in range(1, len(pos) + 1):
        masks = list(itertools.combinations(pos, count))
        total = 0.0
        for M in masks:
            x = tokens.clone()
            x[list(M)] = MASK
            logits = m.forward_blockwise(x[None], [G] * (tokens.shape[0] // G))[0]
            total += float(F.cross_entropy(logits[list(M)], tokens[list(M)], reduction="sum"))
        means.append(total / count / len(masks))
    return means


@pytest.mark.parametrize("objective", ["frontier", "blocks"])
@pytest.mark.parametrize("weighting", ["elbo", "masked"])
@pytest.mark.parametrize("supervised", [4, 2])
@torch.no_grad()
def test_the_training_loss_estimates_the_bound(objective, weighting, supervised):
    """Many draws of one sequence whose last block is the only one supervised: the mean of the
    `elbo` training loss is the enumerated bound (within 4 standard errors), as MDLM's 1/t
    estimate is. A draw that masks nothing, made to mask one position at its small t and
    weighted 1/t, put it at about twice the bound (G = 4). The `masked` mean counts that forced
    lone position too: one masked is drawn twice as often as each other count."""
    m = mixing_model("tiny_attn", scale=1.0)
    G = m.recipe.block_size
    tokens = torch.randint(0, 256, (2 * G,), generator=torch.Generator().manual_seed(0))
    target = torch.zeros(2 * G, dtype=torch.bool)
    target[G : G + supervised] = True
    c = _by_count(m, tokens, target, G)
    n = len(c)
    want = sum(c) / n if weighting == "elbo" else (c[0] + sum(c)) / (n + 1)
    R = 6000
    batch = Batch(tokens.repeat(R, 1), target.repeat(R, 1))
    gen = torch.Generator().manual_seed(1)
    if objective == "frontier":
        per_row = _frontier_rows(m, draw_frontier(batch, G, MASK, gen), weighting)
    else:
        per_row = block_losses(m, draw_blocks(batch, G, MASK, gen), weighting)[:, 0]
    got, se = float(per_row.mean()), float(per_row.std()) / R**0.5
    assert abs(got - want) < 4 * se + 1e-3, (got, want, se)


def _frontier_rows(m, f, weighting) -> torch.Tensor:
    """Each row's frontier loss ([B]): the batch loss is their mean."""
    terms, rows = _frontier_terms(m, f, weighting)
    per_row = torch.zeros(f.inputs.shape[0]).index_add_(0, rows, terms.float())
    torch.testing.assert_close(per_row.mean(), frontier_loss(m, f, weighting)[0])
    return per_row
