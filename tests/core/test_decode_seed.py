"""`fsc decode --seed` where it changes nothing (weights read from files, decoded greedily, no
random reveal order) is noted, not silently ignored; where it draws the weights or the samples
nothing is said."""

import pytest


@pytest.fixture
def ckpt(save_tiny):
    return save_tiny("ck")


@pytest.mark.parametrize("extra, hint", [((), "--temperature T to sample, or --policy random"),
                                         (("--mode", "ar"), "--temperature T to sample)")])
def test_a_seed_that_draws_nothing_is_noted(fsc_main, ckpt, extra, hint):
    res = fsc_main("decode", ckpt, "--prompt", "Hi", "--length", "4", "--seed", "0", *extra,
                   check=0)
    said = " ".join(res.stderr.split())
    assert f"note: --seed 0 changes nothing here: the weights are read from {ckpt}" in said
    assert hint in said


@pytest.mark.parametrize("source, extra", [
    ("tiny_hybrid", ("--seed", "3")),  # the seed draws the weights
    ("CK", ("--seed", "3", "--temperature", "1")),  # ... the samples
    ("CK", ("--seed", "3", "--policy", "random", "--steps", "2")),  # ... the reveal order
    ("CK", ()),  # not given
])
def test_a_seed_that_draws_something_is_not_noted(fsc_main, ckpt, source, extra):
    res = fsc_main("decode", ckpt if source == "CK" else source, "--prompt", "Hi", "--length",
                   "4", *extra, check=0)
    assert "--seed" not in res.stderr
