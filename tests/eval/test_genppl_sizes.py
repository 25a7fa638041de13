"""genppl before and while it runs: a size that cannot fit the memory is one line naming the
option and how far it fits, before any model is loaded; the samples go by as a progress bar on
stderr."""

import pytest

from fsc.eval import genppl

GiB = 2**30


@pytest.fixture
def no_model(monkeypatch):
    """Loading the scored model ends the command (exit 2, 'a model was loaded')."""
    from fsc.errors import UsageError
    from fsc.scale import evaluation

    def refuse(*_a, **_k):
        raise UsageError("a model was loaded")

    monkeypatch.setattr(evaluation, "model_to_score", refuse)


def _errors(res) -> list[str]:
    return [line for line in res.stderr.strip().splitlines() if not line.startswith("warning:")]


def test_a_prompt_that_cannot_fit_is_refused_before_any_model_loads(fsc_main, tmp_path,
                                                                     ar_recipe, monkeypatch,
                                                                     no_model):
    # 1 GiB free: a 100,000-token prompt folded at G 4 holds a 100,000² mask (about 47 GiB)
    monkeypatch.setattr(genppl, "free_bytes", lambda device: GiB)
    args = ["eval", "tiny_hybrid", "--task", "genppl", "--data", "shakespeare", "--samples", "2",
            "--lengths", "16", "--steps", "4", "--scorer", ar_recipe, "--store", tmp_path / "st"]
    res = fsc_main(*args, "--prompt-length", "100000")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    [line] = _errors(res)
    assert line.startswith("error: --prompt-length 100000 and --lengths 16: 2 genppl samples "
                           "decoded together need at least "), line
    assert "but cpu has 1.00 GiB free" in line
    assert "to fold the 100000-token prompt in one pass" in line
    fit = int(line.rsplit("at most --prompt-length ", 1)[1].split()[0])
    assert 0 < fit < 100000
    assert not (tmp_path / "st").exists()  # nothing recorded
    # the limit it names is the edge: one token more is refused, the limit itself passes
    above = fsc_main(*args, "--prompt-length", str(fit + 1))
    assert f"at most --prompt-length {fit} fits" in above.stderr
    at = fsc_main(*args, "--prompt-length", str(fit))
    assert _errors(at) == ["error: a model was loaded"]


def test_a_sample_too_long_for_the_scorer_names_the_length(fsc_main, tmp_path, ar_recipe,
                                                           monkeypatch, no_model):
    # An autoregressive checkpoint folds its prompt causally (no mask); the scorer reads the
    # prompt and the sample in one pass: at 2 MiB free a 16-token prompt leaves room for a
    # few tokens, not 100,000.
    monkeypatch.setattr(genppl, "free_bytes", lambda device: 2**21)
    res = fsc_main("eval", ar_recipe, "--task", "genppl", "--data", "shakespeare",
                   "--samples", "1", "--lengths", "100000", "--prompt-length", "0",
                   "--scorer", ar_recipe, "--store", tmp_path / "st")
    [line] = _errors(res)
    assert res.returncode == 2 and "--lengths 100000" in line, line
    assert "the scorer to read 100001 tokens in one pass" in line
    fit = int(line.rsplit("; at most --lengths ", 1)[1].split()[0])
    assert 0 < fit < 100000


def test_the_samples_go_by_as_a_progress_bar(fsc_main, tmp_path, ar_recipe):
    res = fsc_main("eval", "tiny_hybrid", "--task", "genppl", "--data", "shakespeare",
                   "--samples", "2", "--lengths", "8", "--prompt-length", "4", "--steps", "2,4",
                   "--scorer", ar_recipe, "--store", tmp_path / "st", check=0)
    # 2 samples in each of 3 cells (the reference text, K 2, K 4)
    bar = [line for line in res.stderr.splitlines() if ": samples" in line]
    assert len(bar) == 1 and bar[0].startswith("eval ") and "6/6" in bar[0], res.stderr


def test_a_scorer_read_in_windows_needs_a_window_of_memory(ar_recipe):
    """A scorer with a trained length reads a longer prompt and sample a window at a time
    (fsc.eval.scorers.continuation_nll): the memory check counted the whole text in one
    pass and refused lengths that fit."""
    from fsc.recipe import load_recipe

    recipe = load_recipe(ar_recipe)
    whole = genppl.sample_bytes(genppl.Models({}, frozenset(), recipe), 8, 100000)
    windowed = genppl.sample_bytes(genppl.Models({}, frozenset(), recipe, 16), 8, 100000)
    assert whole[2] == "the scorer to read 100008 tokens in one pass"
    assert windowed[2] == "the scorer to read 100008 tokens in windows of 16"
    assert windowed[0] < whole[0] / 100
    assert genppl.sample_bytes(genppl.Models({}, frozenset(), recipe, 16), 4, 8) == \
        genppl.sample_bytes(genppl.Models({}, frozenset(), recipe), 4, 8)[:2] + (
            "the scorer to read 12 tokens in one pass",)


def test_a_trained_scorer_is_held_to_its_window_at_the_command_line(fsc_main, tmp_path,
                                                                     ar_recipe, monkeypatch,
                                                                     no_model):
    """The same 100,000 tokens under a scorer fsc trained on 16: the check counts a window of
    16 for it, and what does not fit is the decoding's cache, not the scorer's read."""
    from fsc.checkpoint.io import save_checkpoint
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    save_checkpoint(build_model(load_recipe(ar_recipe), seed=0), tmp_path / "sc", training={
        "objective": "ar", "steps": 1, "data": "shakespeare", "seq_len": 16, "final_loss": 5.0})
    monkeypatch.setattr(genppl, "free_bytes", lambda device: 2**21)
    res = fsc_main("eval", ar_recipe, "--task", "genppl", "--data", "shakespeare",
                   "--samples", "1", "--lengths", "100000", "--prompt-length", "0",
                   "--scorer", tmp_path / "sc", "--store", tmp_path / "st")
    [line] = _errors(res)
    assert res.returncode == 2 and "--lengths 100000" in line, line
    assert "the scorer to read" not in line and "to fold the 1-token prompt" in line, line
