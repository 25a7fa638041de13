"""README's tour followed line by line, in order, as a newcomer runs it: every training
directory or checkpoint a line reads was written by a line before it."""

import shlex
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
WRITES = ("--out", "--save", "--dir")  # the options a tour line writes a directory with
LOCAL = ("runs/", "ckpt/")  # what the tour writes and reads back


def tour() -> list[list[str]]:
    """The tour's fsc commands in order, each as its words (comments dropped, `;` and `&&`
    split)."""
    text = README.read_text().split("## A tour", 1)[1]
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        part: list[str] = []
        for word in [*words, ";"]:
            ends = word.endswith(";") or word == "&&"
            word = word.rstrip(";") if word != "&&" else ""
            if word:
                part.append(word)
            if ends:
                if part and part[0] == "fsc":
                    commands.append(part)
                part = []
    return commands


def read_and_written(words: list[str]) -> tuple[list[str], list[str]]:
    """The local directories a command reads (its source, --resume, --scorer) and writes."""
    reads, writes = [], []
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        if not word.startswith(LOCAL):
            continue
        (writes if before in WRITES else reads).append(word.rstrip("/"))
    return reads, writes


def test_every_directory_the_tour_reads_was_written_before():
    """`fsc train runs/ar --G 8 ...` read a directory no line wrote, and `fsc eval ckpt/qwen3
    --task harness` came before the `fsc import ... --out ckpt/qwen3` that makes it: each
    failed as written ("no such checkpoint, training directory or recipe file")."""
    written: list[str] = []
    missing = []
    for words in tour():
        reads, writes = read_and_written(words)
        for path in reads:
            if not any(path == w or path.startswith(w + "/") for w in written):
                missing.append(f"{' '.join(words[:3])}: {path}")
        written += writes
    assert tour() and not missing, missing


def _line(reads: str | None = None, writes: str | None = None) -> list[str]:
    for words in tour():
        r, w = read_and_written(words)
        if (reads is None or reads in r) and (writes is None or writes in w):
            return words
    raise AssertionError(f"no tour line reads {reads} / writes {writes}")


def _short(words: list[str], steps: str) -> list[str]:
    """A tour line with its --train-steps cut to `steps` (the rest as written)."""
    i = words.index("--train-steps")
    return [*words[1 : i + 1], steps, *words[i + 2 :]]


@pytest.mark.slow  # two trainings of a few steps: seconds
def test_the_adaptation_runs_as_the_tour_writes_it(fsc_cli, tmp_path):
    """The tour's two lines, an AR training into runs/ar and its adaptation into a denoiser,
    run in order with their step counts cut; the second reads what the first wrote."""
    ar = _line(writes="runs/ar")
    adapted = _line(reads="runs/ar")
    store = tmp_path / "store"
    fsc_cli(*_short(ar, "2"), "--batch", "2", "--store", store, check=0)
    res = fsc_cli(*_short(adapted, "2"), "--batch", "2", "--store", store, check=0)
    said = " ".join(res.stdout.split())
    assert "adapted from" in said and "at G 8" in said, said
    assert (tmp_path / "runs" / "adapted").is_dir()
