"""Mamba-2's memory bounded: `mamba.max_half_life: h` caps every token's log decay dt·A at
-ln 2 / h, so what a token wrote is at most half there h tokens later whatever the weights
learn. In every path: the chunked training forward, the two-stream objective, the cached step
and fold through the op (a rate per token), the rows of a ragged batch; the recipe's hash
changes only when it is given, and no weight does.
"""

import json
import math

import pytest
import torch
from model_checks import (
    mixing_model,
    ragged_rows_decode_alone,
    random_tokens,
    same_weights,
    two_stream_equals_its_loop,
    variant,
    walk_blocks,
)

from fsc.recipe import load_recipe


def _bounded(name: str, h: float | None, G: int | None = None):
    return variant(name, {"mamba.max_half_life": h}, G)


def test_in_the_hash_only_when_given_and_no_weight_changes():
    base = load_recipe("tiny_mamba")
    assert _bounded("tiny_mamba", None).recipe_hash == base.recipe_hash
    assert _bounded("tiny_mamba", 4).recipe_hash not in (base.recipe_hash,
                                                          _bounded("tiny_mamba", 8).recipe_hash)
    assert same_weights(base, _bounded("tiny_mamba", 4))


@torch.no_grad()
def test_a_token_is_at_most_half_there_a_half_life_later():
    """Two inputs that differ only in their first token: after the conv's window the states
    differ by the decays that follow alone (dt is read from each token, unconvolved), so 4·h
    tokens later the difference is at most 2^-4 of what it was, in every head; without the
    bound this model keeps far more of it."""
    h, T0 = 3.0, 6

    def states(half_life):
        mixer = mixing_model(_bounded("tiny_mamba", half_life, 1)).layers[0].mixer
        x = torch.randn(1, T0 + int(4 * h), mixer.d_model, generator=torch.Generator().manual_seed(2))
        y = x.clone()
        y[:, 0] += 3.0
        out = []
        for T in (T0, T0 + int(4 * h)):
            ends = [mixer.forward_blockwise_from(v[:, :T], [1] * T, None)[1]["ssm"] for v in (x, y)]
            out.append((ends[0] - ends[1]).flatten(2).norm(dim=-1)[0])  # per head
        return out

    before, after = states(h)
    assert (before > 0).all() and (after <= before * 2 ** -4 * (1 + 1e-4)).all()
    before, after = states(None)
    assert (after > before * 2 ** -4).any()


@pytest.mark.parametrize("name", ["tiny_mamba", "tiny_hybrid"])
@pytest.mark.parametrize("G", [1, 4])
@torch.no_grad()
def test_cached_step_and_fold_equal_the_blockwise_forward(name, G):
    walk_blocks(mixing_model(_bounded(name, 2, G)), random_tokens(G * 5, seed=G), G, atol=1e-4,
                unlike=mixing_model(_bounded(name, None, G)))


def test_two_stream_equals_its_reference_loop():
    two_stream_equals_its_loop(mixing_model(_bounded("tiny_mamba", 2, 4)))


@pytest.mark.parametrize("name", ["tiny_mamba", "tiny_hybrid"])
def test_a_ragged_batch_decodes_each_row_as_alone(name):
    ragged_rows_decode_alone(mixing_model(_bounded(name, 2), seed=5))


def test_the_least_rate_is_ln2_over_the_half_life():
    mixer = mixing_model(_bounded("tiny_mamba", 4)).layers[0].mixer
    assert mixer.min_rate == pytest.approx(math.log(2) / 4)
    assert mixing_model(load_recipe("tiny_mamba")).layers[0].mixer.min_rate is None


def test_scored_with_and_without_it_at_the_command_line(fsc_main, cli, tmp_path):
    """`fsc eval --set mamba.max_half_life=2` of a checkpoint scores its weights with the memory
    bounded, another loss, and names it in the recipe; none is the plain recipe's; zero is one
    line, exit 2. (The checkpoint's mixers are scaled up so that the memory matters to the
    logits: at a random initialisation it barely does.)"""
    from fsc.checkpoint.io import save_checkpoint

    save_checkpoint(mixing_model("tiny_mamba"), tmp_path / "ckpt", seed=3)
    args = ["ckpt", "--task", "loss", "--data", "shakespeare", "--lengths", "32",
            "--samples", "2", "--store", tmp_path / "store", "--json"]
    plain = json.loads(fsc_main("eval", *args).stdout)["rows"][0]
    res = fsc_main("eval", *args, "--set", "mamba.max_half_life=2")
    assert res.returncode == 0, res.stderr
    bounded = json.loads(res.stdout)["rows"][0]
    assert bounded["recipe"] == "tiny_mamba+mamba.max_half_life=2"
    assert abs(bounded["loss"] - plain["loss"]) > 1e-3  # not float noise
    none = json.loads(fsc_main("eval", *args, "--set", "mamba.max_half_life=none").stdout)["rows"][0]
    assert none["loss"] == plain["loss"]
    bad = cli("eval", "tiny_mamba", "--set", "mamba.max_half_life=0", "--store", tmp_path / "s2")
    assert bad.code == 2 and "max_half_life" in bad.err and len(bad.err.strip().splitlines()) == 1
