"""Every fsc progress bar (fsc.cli.progress.bar) keeps its count and times whole on a narrow
line: an 80-column terminal showed `213/10…`, which reads as 213 of about 10. The bar gives
way first, then the description, cut on its one line."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from fsc.cli import progress

TRAIN = "train tiny_attn: loss 0.0052, 27.9k tok/s"
LONG = "train a_recipe_with_a_rather_long_name: loss 0.0052, 27.9k tok/s"
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def shown(width: int, descriptions: list[str], **how) -> list[str]:
    """The lines of a bar of each description (213 of 100000 done) on a terminal `width`
    columns wide, less their colours."""
    screen = io.StringIO()
    console = Console(file=screen, width=width, force_terminal=True)
    bar = progress.bar(console, transient=False, **how)
    for text in descriptions:
        bar.add_task(text, total=100_000, completed=213)
    console.print(bar)
    return ESCAPE.sub("", screen.getvalue()).splitlines()


@pytest.mark.parametrize("remaining", [True, False])
@pytest.mark.parametrize("width", [80, 60])
def test_the_count_and_times_stay_whole_and_each_bar_one_line(width, remaining):
    lines = shown(width, [LONG, "p " * 60, "short"], remaining=remaining)
    assert len(lines) == 3
    for line in lines:
        assert len(line) <= width and "213/100000" in line
        assert line.endswith("0:00:00 -:--:--" if remaining else "213/100000 0:00:00")
    assert lines[0].startswith("train a_recipe") and "…" in lines[0]
    assert lines[2].startswith("short ") and "━" in lines[2]


def test_the_bar_gives_way_before_the_description():
    wide, = shown(80, [TRAIN])  # the bar narrows to what the whole description leaves
    assert wide.startswith(f"{TRAIN} ━") and len(wide) == 80
    narrow, = shown(60, [TRAIN])  # one column of bar, then the description cut
    assert narrow.startswith("train tiny_attn: loss") and "… ━ " in narrow
