"""User text never reaches rich markup: names like "[/bold]" print as themselves in every
command's output, progress bar and table (the consoles read no markup; every bar is
fsc.cli.progress.bar's, whose description is plain Text)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fsc.cli import common
from fsc.recipe import load_recipe

CLI = Path(common.__file__).parent
NAME = "[/bold]x[red]"


@pytest.fixture
def odd(tmp_path) -> Path:
    path = tmp_path / "odd.yaml"
    path.write_text(load_recipe("tiny_attn").to_yaml().replace("name: tiny_attn",
                                                               f"name: '{NAME}'"))
    return path


def test_the_consoles_read_no_markup_and_no_bar_is_built_another_way():
    assert common.out._markup is False and common.err._markup is False
    for path in CLI.glob("*.py"):
        text = path.read_text()
        assert "Progress(" not in text or path.name == "progress.py", path.name
        assert "TextColumn(" not in text, path.name
        assert "rich.markup" not in text, f"{path.name}: style with Text or style=, not markup"
        assert not re.search(r"\[(bold|red|green|dim|yellow)[] ]", text), path.name


def test_train_on_a_recipe_named_with_markup(cli, odd, tmp_path):
    r = cli("train", odd, "--data", "copy", "--seq-len", "16", "--batch", "2", "--train-steps", "2",
            "--out", tmp_path / "run", "--store", tmp_path / "store")
    assert r.code == 0, r.err
    assert f"train {NAME}" in r.err and f"trained {NAME}" in r.out


def test_build_prints_the_name_as_it_is(cli, odd):
    r = cli("build", odd)
    assert r.code == 0, r.err
    assert r.out.startswith(NAME)
