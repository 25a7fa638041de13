"""The blocks objective: every supervised block a frontier in one two-stream forward. Each
block's loss is the frontier loss of that block drawn alone, and the gradients are theirs."""

import json

import pytest
import torch
from model_checks import EVERY_MIXER, mixing_model, passkey_batch
from safetensors.torch import load_file

from fsc.model.mixer import Mixer
from fsc.objective import (
    Batch,
    Frontier,
    block_losses,
    blocks_loss,
    draw_blocks,
    frontier_loss,
    loss_of,
)
from fsc.store import Store
from fsc.tokenizer import ByteTokenizer

MASK = ByteTokenizer.mask_id


def _batch(G, B=3, n=6, seed=0):
    """Random tokens; each sequence supervises a different set of blocks (and so holds padding
    blocks in the draw), one block with a single supervised position."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 256, (B, n * G), generator=g)
    target = torch.zeros(B, n * G, dtype=torch.bool)
    target[0] = True
    target[1, 2 * G : 4 * G] = True
    target[2, n * G - 1] = True
    target[2, G : 2 * G] = torch.rand(G, generator=g) < 0.7
    target[2, G] = True
    return Batch(tokens, target)


def _alone(d, b, k) -> Frontier:
    """The frontier draw of block k of sequence b alone: the clean prefix, then the block."""
    G, j = d.G, int(d.blocks[b, k])
    unit = slice(k * G, (k + 1) * G)
    prefix = d.clean[b, : j * G]
    masked = torch.cat([torch.zeros(j * G, dtype=torch.bool), d.masked[b, unit]])
    return Frontier(torch.cat([prefix, d.noised[b, unit]])[None],
                    torch.cat([prefix, d.labels[b, unit]])[None], masked[None],
                    torch.tensor([j]), d.rate[b, k : k + 1], d.supervised[b, k : k + 1], G,
                    d.forced[b, k : k + 1])


def test_draws_mask_every_supervised_block_and_nothing_else():
    G = 4
    batch = passkey_batch(8, G)
    for seed in range(10):
        d = draw_blocks(batch, G, MASK, torch.Generator().manual_seed(seed))
        for b in range(8):
            want = batch.target[b].view(-1, G).any(-1).nonzero().flatten()
            assert torch.equal(d.blocks[b][d.scored[b]], want)  # every supervised block, in order
            for k, j in enumerate(d.blocks[b].tolist()):
                unit = slice(k * G, (k + 1) * G)
                assert torch.equal(d.labels[b, unit], batch.tokens[b, j * G : (j + 1) * G])
                m = d.masked[b, unit]
                assert int(m.sum()) >= 1 if d.scored[b, k] else not m.any()
                assert batch.target[b, j * G : (j + 1) * G][m].all()  # only answers are masked
                assert (d.noised[b, unit][m] == MASK).all()
                assert torch.equal(d.noised[b, unit][~m], d.labels[b, unit][~m])
        assert torch.equal(d.clean, batch.tokens[:, : d.clean.shape[1]])
        assert d.clean.shape[1] == (int(d.blocks.max()) + 1) * G  # cut after the last


@pytest.mark.parametrize("name", EVERY_MIXER)
@pytest.mark.parametrize("weighting", ["elbo", "masked"])
@torch.no_grad()
def test_each_block_loss_is_its_frontier_loss_alone(name, weighting):
    m = mixing_model(name)
    G = m.recipe.block_size
    d = draw_blocks(_batch(G), G, MASK, torch.Generator().manual_seed(1))
    got = block_losses(m, d, weighting)
    assert int(d.scored.sum()) == 6 + 2 + 2 and not d.scored.all()  # padding blocks too
    for b, k in d.scored.nonzero().tolist():
        want = frontier_loss(m, _alone(d, b, k), weighting)[0]
        torch.testing.assert_close(got[b, k], want, rtol=1e-5, atol=1e-5)
    assert (got[~d.scored] == 0).all()
    # the check can fail: a masked label of one block changes that block's loss alone
    b, k = d.scored.nonzero()[-1].tolist()
    labels = d.labels.clone()
    at = d.masked[b].nonzero()[-1, 0]
    labels[b, at] = (labels[b, at] + 1) % 256
    changed = block_losses(m, type(d)(**{**d.__dict__, "labels": labels}), weighting)
    assert abs(float(changed[b, k] - got[b, k])) > 1e-3
    torch.testing.assert_close(changed[:b], got[:b], rtol=0, atol=0)


@pytest.mark.parametrize("name", EVERY_MIXER)
def test_gradients_equal_those_of_each_block_alone(name):
    m = mixing_model(name, scale=2.0)
    G = m.recipe.block_size
    d = draw_blocks(_batch(G), G, MASK, torch.Generator().manual_seed(2))
    loss, n = blocks_loss(m, d, "elbo")
    assert n == d.clean.numel() + d.noised.numel()
    grads = torch.autograd.grad(loss, list(m.parameters()), allow_unused=True)
    ref = 0.0
    per_row = d.scored.sum(-1)
    for b, k in d.scored.nonzero().tolist():
        ref = ref + frontier_loss(m, _alone(d, b, k), "elbo")[0] / per_row[b] / len(per_row)
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-6)
    want = torch.autograd.grad(ref, list(m.parameters()), allow_unused=True)
    for (name_, _), g, w in zip(m.named_parameters(), grads, want):
        assert (g is None) == (w is None), name_
        if g is not None:
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=name_)


@pytest.mark.parametrize("G", [1, 2, 5])
@pytest.mark.parametrize("name", EVERY_MIXER)
@torch.no_grad()
def test_every_mixer_two_stream_form_equals_its_reference_loop(name, G):
    """Every mixer's batched form against `Mixer.forward_two_stream_loop` (a
    `forward_blockwise` per noised block), at block sizes that change the chunk layouts."""
    m = mixing_model(name)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 5 * G, m.recipe.d_model, generator=g)
    xn = torch.randn(2, 3 * G, m.recipe.d_model, generator=g)
    blocks = torch.tensor([[0, 2, 4], [3, 1, 3]])
    for layer in m.layers:
        mixer = layer.mixer
        assert type(mixer).forward_two_stream is not Mixer.forward_two_stream  # a batched form
        yc, yn = mixer.forward_two_stream(x, xn, blocks)
        rc, rn = mixer.forward_two_stream_loop(x, xn, blocks)
        torch.testing.assert_close(yc, rc, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(yn, rn, rtol=1e-5, atol=1e-5)
        assert (yn[:, :G] - mixer.forward_blockwise(x[:, :G], [G])).abs().max() > 1e-3  # noised differs


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_fsc_train_objective_blocks_records_it_and_resumes(fsc_main, tmp_path):
    store = ["--store", tmp_path / "store"]
    run = ["tiny_mamba", "--data", "copy", "--seq-len", "32", "--batch", "4", "--train-steps", "4"]
    fsc_main("train", *run, "--objective", "blocks", "--out", tmp_path / "whole", *store, check=0)
    half = fsc_main("train", *run, "--objective", "blocks", "--out", tmp_path / "split",
                    "--stop-after", "2", *store, check=0)
    assert "stopped at step 2 of 4" in half.stderr
    fsc_main("train", "--resume", tmp_path / "split", *store, check=0)
    a = load_file(tmp_path / "whole" / "step-000004" / "model.safetensors")
    b = load_file(tmp_path / "split" / "step-000004" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)  # the resumed run trained the same objective
    state = json.loads((tmp_path / "split" / "step-000004" / "training_state.json").read_text())
    assert state["config"]["objective"] == "blocks"
    assert "(objective `blocks`" in (tmp_path / "split" / "step-000004" / "README.md").read_text()
    _, rows = Store(tmp_path / "store").query("select distinct objective from training")
    assert rows == [("blocks",)]


@torch.no_grad()
def test_a_process_share_of_the_draw_adds_up_to_the_whole_batch():
    """`loss_of(..., part)`: the draws are made for the whole batch and cut, so the shares'
    losses average to the whole batch's (data-parallel training)."""
    m = mixing_model("tiny_mamba")
    batch = _batch(4)  # 3 sequences
    whole, _ = loss_of(m, "blocks", batch, 4, MASK, torch.Generator().manual_seed(7))
    shares = [loss_of(m, "blocks", batch, 4, MASK, torch.Generator().manual_seed(7), part=p)[0]
              for p in (slice(0, 1), slice(1, 3))]
    torch.testing.assert_close((shares[0] + 2 * shares[1]) / 3, whole, rtol=1e-5, atol=1e-6)
    other, _ = loss_of(m, "blocks", batch, 4, MASK, torch.Generator().manual_seed(8))
    assert abs(float(other - whole)) > 1e-3  # another draw, another loss
