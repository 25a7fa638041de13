"""The held-out bound of a diffusion checkpoint: unbiased for the ELBO (checked against the
bound computed exactly by enumerating every mask of a short sequence), and the AR loss is the
next-token NLL; bits per byte follow from them."""

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from fsc.eval.loss import draw_bound, sequence_bounds
from fsc.model.lm import build_model
from fsc.objective import Batch
from fsc.recipe import load_recipe
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


@torch.no_grad()
def _exact_bound(model, ids: list[int], G: int) -> float:
    """Per-token ELBO of `ids` (blocks of G): Σ over blocks and l = 1..G of the mean CE of a
    position when l of its block are masked (every mask of size l enumerated)."""
    total = 0.0
    x = torch.tensor([ids])
    for b in range(len(ids) // G):
        for size in range(1, G + 1):
            ces = []
            for masked in itertools.combinations(range(G), size):
                noised = x[:, b * G : (b + 1) * G].clone()
                noised[0, list(masked)] = TOK.mask_id
                logits = model.forward_two_stream(x[:, : (b + 1) * G], noised,
                                                  torch.tensor([[b]]))[0]
                ce = F.cross_entropy(logits[list(masked)], x[0, b * G + torch.tensor(masked)],
                                     reduction="mean")
                ces.append(float(ce))
            total += sum(ces) / len(ces)
    return total / len(ids)


def test_the_bound_is_unbiased_for_the_elbo():
    model = build_model(load_recipe("tiny_attn"), seed=2).eval()  # G = 4
    ids = TOK.encode("To be, or not to")[:8]
    exact = _exact_bound(model, ids, 4)
    batch = Batch(torch.tensor([ids] * 400), torch.ones(400, 8, dtype=torch.bool))
    with torch.no_grad():
        draws = sequence_bounds(model, batch, 4, TOK.mask_id,
                                [torch.Generator().manual_seed(i) for i in range(400)])
    se = float(draws.std()) / math.sqrt(len(draws))
    assert abs(float(draws.mean()) - exact) < 4 * se, (float(draws.mean()), exact, se)
    assert se < 0.05 * exact  # the estimate is tight enough for the check to bite


def test_every_block_masks_between_one_and_all_of_its_positions():
    batch = Batch(torch.arange(64).view(2, 32) % 200, torch.ones(2, 32, dtype=torch.bool))
    d = draw_bound(batch, 8, TOK.mask_id, [torch.Generator().manual_seed(i) for i in (1, 2)])
    per_block = d.masked.view(2, 4, 8).sum(-1)
    assert (per_block >= 1).all() and (per_block <= 8).all()
    assert len(set(per_block.flatten().tolist())) > 2  # l is drawn, not fixed
    assert (d.noised[d.masked] == TOK.mask_id).all()
    assert (d.noised[~d.masked] == d.labels[~d.masked]).all()


def test_a_sequences_bound_does_not_depend_on_the_batch(fsc_main, tmp_path):
    """Each sequence draws its masks from its own seed: the cell's bound at --batch 2 is the
    one at --batch 5."""
    import json

    def bound(batch: int) -> float:
        res = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", "shakespeare",
                       "--lengths", "16", "--samples", "5", "--batch", str(batch), "--json",
                       "--store", tmp_path / f"st{batch}", check=0)
        [row] = json.loads(res.stdout)["rows"]
        assert row["mode"] == "diffusion"  # a bound
        return row["loss"]

    assert bound(2) == pytest.approx(bound(5), rel=1e-5)


def test_steps_are_refused_as_the_loss_decodes_nothing(fsc_main, tmp_path):
    res = fsc_main("eval", "tiny_attn", "--task", "loss", "--data", "shakespeare", "--steps",
                   "2", "--store", tmp_path / "st")
    assert res.returncode == 2 and "--steps: --task loss decodes nothing" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "st").exists()


def test_ar_loss_is_the_next_token_nll_and_bits_per_byte_follow(fsc_main, tmp_path):
    import json

    text = load_recipe("tiny_attn").to_yaml().replace("block_size: 4", "block_size: 1")
    (tmp_path / "ar.yaml").write_text(text.replace("name: tiny_attn", "name: tiny_ar"))
    res = fsc_main("eval", tmp_path / "ar.yaml", "--task", "loss", "--data", "shakespeare",
                   "--lengths", "16", "--samples", "2", "--store", tmp_path / "st", "--json",
                   check=0)
    [row] = json.loads(res.stdout)["rows"]
    assert row["mode"] == "ar"
    assert row["bits_per_byte"] == pytest.approx(row["loss"] / math.log(2), rel=1e-6)
    assert 4 < row["loss"] < 8  # about ln 288 for untrained weights


def test_the_table_marks_a_bound_and_gives_bits_per_byte_at_80_columns(fsc_main, ar_recipe,
                                                                        tmp_path, monkeypatch):
    """A row per length: loss in nats/token, its s.e. and bits/byte; a block-diffusion model's
    numbers are bounds (≤, said under the table), an AR model's are exact (no mark); every
    line fits 80 columns."""
    from fsc.cli import common
    from fsc.cli.eval_render import LOSS_BOUND
    from fsc.store import Store

    monkeypatch.setattr(common.out, "width", 80)
    for source, mark in (("tiny_attn", "≤ "), (ar_recipe, "")):
        store = tmp_path / f"st-{bool(mark)}"
        res = fsc_main("eval", source, "--task", "loss", "--data", "shakespeare", "--lengths",
                       "16,32", "--samples", "2", "--store", store, check=0)
        lines = res.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, res.stdout
        header = next(line for line in lines if "length" in line)
        assert [w.strip() for w in header.strip("┃").split("┃")] == [
            "length", "sequences", "loss (nats/token)", "± s.e.", "bits/byte"]
        _, rows = Store(store).query("select length, n, loss, loss_se, bits_per_byte "
                                     "from evaluation order by length")
        for length, n, loss, se, bpb in rows:
            assert f"│ {length} │ {n} │ {mark}{loss:.4f} │ {se:.4f} │ {mark}{bpb:.4f} │" in \
                " ".join(res.stdout.split()), res.stdout
        assert (LOSS_BOUND in lines) == bool(mark) and ("≤" in res.stdout) == bool(mark)
