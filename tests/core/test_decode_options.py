"""fsc decode's options say what they do: one prompt, a backend that can run here, and a
checkpoint decoded at a G it was not trained at is told (or, with no mask token, refused)."""

import json

import pytest


def _trained(objective: str) -> dict:
    """What `fsc train` records of a run (the weights here are seeded: the record is what the
    notes read)."""
    return {"data": "copy", "objective": objective, "steps": 1, "seq_len": 32,
            "final_loss": 1.0}


@pytest.fixture
def checkpoints(tmp_path):
    """(a trained tiny_attn checkpoint at G 4, the same recipe trained at G 1)."""
    from fsc.checkpoint.io import save_checkpoint
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    recipe = load_recipe("tiny_attn")
    save_checkpoint(build_model(recipe, seed=1), tmp_path / "g4", training=_trained("frontier"))
    save_checkpoint(build_model(recipe.as_autoregressive(), seed=1), tmp_path / "ar",
                    training=_trained("ar"))
    return tmp_path / "g4", tmp_path / "ar"


def _one_line(res, says):
    assert res.returncode == 2 and says in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr


def test_two_prompts_are_refused(fsc_main):
    _one_line(fsc_main("decode", "tiny_attn", "--prompt", "a", "--prompt", "b"),
              "--prompt given 2 times: --prompt is one prompt; give several in a file, one a "
              "line, with --prompts FILE")


def test_triton_without_cuda_is_a_usage_error(fsc_main, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    _one_line(fsc_main("decode", "tiny_attn", "--backend", "triton", "--length", "4"),
              "--backend triton needs a CUDA device")


def test_a_checkpoint_decoded_at_another_G_is_noted(fsc_main, checkpoints):
    g4, ar = checkpoints
    res = fsc_main("decode", g4, "--G", "2", "--length", "4", check=0)
    assert "was trained at G 4; decoding at G 2" in res.stderr
    assert "note" not in fsc_main("decode", g4, "--length", "4", check=0).stderr
    res = fsc_main("decode", ar, "--mode", "diffusion", "--G", "4", "--length", "4", check=0)
    assert f"fsc train {ar} --G 4" in res.stderr  # bytes have a mask token: a note


def test_seeded_weights_saved_as_a_checkpoint_learned_no_G(fsc_main, tmp_path):
    """`fsc build --save` writes untrained weights: decoded at any G, or autoregressively,
    there is nothing they were trained at to note."""
    fsc_main("build", "tiny_attn", "--save", tmp_path / "seeded", check=0)
    for args in (["--G", "2"], ["--mode", "ar"]):
        res = fsc_main("decode", tmp_path / "seeded", *args, "--length", "4", check=0)
        assert "note" not in res.stderr and "trained" not in res.stderr, res.stderr


def test_an_ar_checkpoint_without_a_mask_token_points_to_adapting_it(fsc_main, checkpoints,
                                                                    tmp_path):
    from tokenizers import Tokenizer, models

    folder = tmp_path / "tok"
    folder.mkdir()
    vocab = {chr(i): i for i in range(32, 127)} | {"[UNK]": 127}
    Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]")).save(
        str(folder / "tokenizer.json"))
    _, ar = checkpoints
    res = fsc_main("decode", ar, "--mode", "diffusion", "--G", "4", "--tokenizer", folder)
    _one_line(res, f"no mask token for block diffusion: adapt it first (fsc train {ar} --G 4")


def test_top_k_one_samples_the_greedy_tokens(fsc_main):
    """--top-k 1 leaves each draw the most likely token: sampled at any temperature, an
    autoregressive decode is the greedy one; with --top-k 0 (every token) it is not."""
    run = ["decode", "tiny_attn", "--mode", "ar", "--prompt", "The", "--length", "16", "--json"]

    def tokens(*extra):
        return json.loads(fsc_main(*run, *extra, check=0).stdout)["token_ids"]

    greedy = tokens()
    assert tokens("--temperature", "2", "--top-k", "1") == greedy  # (--seed seeds the weights)
    assert tokens("--temperature", "2", "--top-k", "0") != greedy
    res = fsc_main("decode", "tiny_attn", "--top-k", "-1")
    assert res.returncode == 2 and "--top-k" in res.stderr
