"""The frontier objective: what it masks, what reaches its loss, and that its logits are the
cached decoder's (`fold` of the clean prefix, then a `step` of the masked frontier)."""

import pytest
import torch
from model_checks import EVERY_MIXER, mixing_model, passkey_batch

from fsc.mixers import KINDS
from fsc.objective import Batch, ar_loss, draw_frontier, frontier_logits, frontier_loss
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer

MASK = ByteTokenizer.mask_id


def test_the_tiny_recipes_cover_every_mixer_kind():
    assert {k for n in EVERY_MIXER for k in load_recipe(n).layer_plan} == set(KINDS)


def _text_batch(B=4, L=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 256, (B, L), generator=g)
    return Batch(tokens, torch.ones(B, L, dtype=torch.bool))


def test_masks_only_supervised_frontier_positions_and_at_least_one():
    G = 4
    batch = passkey_batch(16, G)
    for seed in range(20):
        f = draw_frontier(batch, G, MASK, torch.Generator().manual_seed(seed))
        T = f.inputs.shape[1]
        assert T % G == 0 and T <= 128
        for b in range(16):
            blk = int(f.block[b])
            rows = f.masked[b].nonzero().flatten()
            assert len(rows) >= 1
            assert all(blk * G <= int(i) < (blk + 1) * G for i in rows)  # inside the frontier
            assert batch.target[b, rows].all()  # only answers are masked
            assert batch.target[b, blk * G : (blk + 1) * G].any()
            assert torch.equal(f.inputs[b, : blk * G], batch.tokens[b, : blk * G])  # clean prefix
            assert (f.inputs[b][f.masked[b]] == MASK).all()
        assert ((f.rate > 0) & (f.rate <= 1)).all()


def test_rates_spread_and_frontiers_are_uniform():
    batch = _text_batch(B=512, L=16)
    f = draw_frontier(batch, 4, MASK, torch.Generator().manual_seed(0))
    counts = torch.bincount(f.block, minlength=4)
    assert counts.min() > 90  # 128 expected per block
    frac = f.masked.sum(-1).float() / 4
    assert abs(float(torch.corrcoef(torch.stack([frac, f.rate]))[0, 1])) > 0.6


@pytest.mark.parametrize("weighting", ["elbo", "masked"])
@torch.no_grad()
def test_later_blocks_and_unmasked_labels_change_nothing(weighting):
    m = mixing_model("tiny_hybrid")
    batch = _text_batch()
    f = draw_frontier(batch, 4, MASK, torch.Generator().manual_seed(1))
    loss, _ = frontier_loss(m, f, weighting)
    changed = f.inputs.clone()
    labels = f.labels.clone()
    for b in range(changed.shape[0]):
        end = (int(f.block[b]) + 1) * 4
        changed[b, end:] = (changed[b, end:] + 7) % 256  # blocks after this row's frontier
        keep = ~f.masked[b]
        keep[: int(f.block[b]) * 4] = False  # the clean prefix is an input: leave it
        labels[b, keep] = (labels[b, keep] + 3) % 256  # labels nobody scores
    g = type(f)(changed, labels, f.masked, f.block, f.rate, f.supervised, f.G, f.forced)
    torch.testing.assert_close(frontier_loss(m, g, weighting)[0], loss, rtol=0, atol=1e-6)
    # ...while a masked label, or a prefix token, does change it (the check can fail)
    labels2 = f.labels.clone()
    labels2[f.masked] = (labels2[f.masked] + 1) % 256
    h = type(f)(f.inputs, labels2, f.masked, f.block, f.rate, f.supervised, f.G, f.forced)
    assert abs(float(frontier_loss(m, h, weighting)[0] - loss)) > 1e-3


@pytest.mark.parametrize("name", EVERY_MIXER)
@torch.no_grad()
def test_training_frontier_logits_equal_fold_then_step(name):
    m = mixing_model(name)
    G = m.recipe.block_size
    batch = _text_batch(B=3, L=6 * G, seed=2)
    f = draw_frontier(batch, G, MASK, torch.Generator().manual_seed(5))
    train = frontier_logits(m, f)  # the training forward's masked frontier logits
    rows = f.masked.nonzero()
    start = 0
    for b in range(3):
        blk = int(f.block[b])
        cache = m.empty_cache(1, (blk + 1) * G, block_size=G)
        for j in range(blk):  # the clean prefix, folded block by block
            m.fold(f.inputs[b : b + 1, j * G : (j + 1) * G], cache)
        step = m(f.inputs[b : b + 1, blk * G : (blk + 1) * G], cache)[0]  # the masked frontier
        n = int((rows[:, 0] == b).sum())
        at = rows[start : start + n, 1] - blk * G
        torch.testing.assert_close(train[start : start + n], step[at], rtol=0, atol=1e-5)
        start += n
    assert start == len(train)


def test_ar_loss_scores_next_tokens_of_supervised_positions():
    m = mixing_model("tiny_attn")
    recipe = m.recipe.model_copy(update={"block_size": 1})
    m.recipe = recipe
    batch = _text_batch(B=2, L=12)
    loss, n = ar_loss(m, batch)
    logits = m.forward_blockwise(batch.tokens, [1] * 12)
    ref = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                            batch.tokens[:, 1:].reshape(-1))
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    assert n == 24
