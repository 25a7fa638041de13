"""What the eval tests share."""

import functools
import sys

import pytest


@pytest.fixture
def ar_recipe(tmp_path):
    """A seeded G = 1 recipe: an autoregressive model (a scorer, a harness model)."""
    from fsc.recipe import load_recipe

    text = load_recipe("tiny_attn").to_yaml().replace("name: tiny_attn", "name: tiny_ar")
    path = tmp_path / "tiny_ar.yaml"
    path.write_text(text.replace("block_size: 4", "block_size: 1"))
    return path


@pytest.fixture
def harness_cli(monkeypatch, capsys):
    """harness_cli(*args) -> (exit code, stdout, stderr): `python -m fsc.harness ARGS` in this
    process. The harness indexes the --include_path tasks alone (not its thousands: seconds)
    and leaves the process's logging as it is."""
    import lm_eval.__main__
    import lm_eval.tasks

    from fsc.harness import __main__ as harness_main

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(lm_eval.__main__, "setup_logging", lambda *a, **k: None)
    monkeypatch.setattr(lm_eval.tasks, "TaskManager",
                        functools.partial(lm_eval.tasks.TaskManager, include_defaults=False))

    def run(*args):
        monkeypatch.setattr(sys, "argv", ["fsc.harness", *map(str, args)])
        capsys.readouterr()
        code = harness_main.main()
        out, err = capsys.readouterr()
        return code, out, err

    return run
