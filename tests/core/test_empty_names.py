"""An empty recipe or checkpoint name is said to be empty (a path reads it as the working
directory, which named a directory the user never typed); --steps alone on a recipe of block
size 1 says why it is refused without naming a --mode the user never gave."""

import pytest


@pytest.mark.parametrize("args", [("estimate", ""), ("decode", "", "--prompt", "a"),
                                  ("verify", " "), ("build", ""),
                                  ("profile", "-r", "", "--dry-run")])
def test_an_empty_name_is_said_to_be_empty(cli, args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli(*args)
    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert r.err.strip().splitlines() == ["error: an empty name: give a recipe file or name, a "
                                          "checkpoint, a training directory or a published "
                                          "model"]


def test_steps_alone_on_a_block_size_1_recipe_names_what_was_given(cli):
    r = cli("estimate", "attn_7b", "--steps", "1")
    assert r.code == 2 and "--mode ar" not in r.err, r.err
    assert "--steps 1: a model of block size 1 decodes autoregressively" in r.err
    assert cli("estimate", "attn_7b", "--steps", "1", "--mode", "diffusion").code == 0
    r = cli("estimate", "attn_7b", "--steps", "2", "--mode", "ar")
    assert r.code == 2 and "--mode ar decodes with G 1" in r.err
