"""Natural text shipped with fsc, usable by name wherever `--data` takes a source.

`shakespeare`: tinyshakespeare, about 40,000 lines of Shakespeare's plays (1,115,394 bytes of
ASCII; public domain), the text karpathy/char-rnn ships as data/tinyshakespeare/input.txt and
nanoGPT's shakespeare_char example trains on (git blob 7dcb3a2d4cc3b48b6283dd46870bfeb78f88aac9,
sha1 of the file 04486597058d11dcc2c556b1d0433891eb639d2e). Split as nanoGPT splits it: the first
90 % of the characters are `shakespeare:train`, the last 10 % `shakespeare:val`, so losses are
comparable with nanoGPT's (about 1.47 nats per character for its 10.7M-parameter GPU model, 1.88
for its 0.8M CPU one).

A bare name is the training split for `fsc train` and the validation split for `fsc eval`.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fsc.errors import UsageError

HERE = Path(__file__).parent
SPLITS = ("train", "val")


@dataclass(frozen=True)
class Corpus:
    name: str
    file: str  # gzip-compressed UTF-8, beside this module
    train_fraction: float  # the first this much of the characters is the training split
    source: str


CORPORA = {
    "shakespeare": Corpus(
        "shakespeare", "tinyshakespeare.txt.gz", 0.9,
        "tinyshakespeare (karpathy/char-rnn data/tinyshakespeare/input.txt; public domain)"),
}


def is_corpus(spec: str) -> bool:
    """Whether `spec` names a shipped corpus (NAME or NAME:SPLIT)."""
    return spec.split(":")[0] in CORPORA


def split_of(spec: str, default: str) -> tuple[Corpus, str]:
    """(corpus, split) that `spec` (NAME or NAME:train|val) names; a bare NAME is `default`."""
    name, _, split = spec.partition(":")
    split = split or default
    if split not in SPLITS:
        raise UsageError(f"--data {spec}: the split must be one of {', '.join(SPLITS)}")
    return CORPORA[name], split


@cache
def _text(file: str) -> str:
    with gzip.open(HERE / file, "rt", encoding="utf-8") as f:
        return f.read()


def read(spec: str, default: str = "train") -> str:
    """The text of a corpus split."""
    corpus, split = split_of(spec, default)
    text = _text(corpus.file)
    cut = int(len(text) * corpus.train_fraction)
    return text[:cut] if split == "train" else text[cut:]
