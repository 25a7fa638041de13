"""The RULER-style suite laid out as NVIDIA's RULER lays it out: needles and chains between
sentences (else words) of the haystack, never inside a word, under a byte-level tokenizer and a
BPE one whose tokens carry a leading space; a haystack from a sentence's start; cwe's frequency
ratios and fwe's Zipf counts as RULER's generators make them."""

import re
from collections import Counter

import pytest

from fsc import corpora
from fsc.data.ruler import SNAP, CommonWords, FrequentWords, Needles, VariableTracking
from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer, HFTokenizer
from tests.imports.published import save_bpe_tokenizer

BYTES = ByteTokenizer()
NEEDLE = re.compile(r" The pass key of \w+ is \d+\.")
STATEMENT = re.compile(r" VAR [A-Z]+ = (?:\d+|VAR [A-Z]+)\.")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """A byte-level BPE tokenizer learned from Shakespeare: its tokens carry a leading space."""
    tok = HFTokenizer(save_bpe_tokenizer(tmp_path_factory.mktemp("bpe")), need_mask=False)
    assert tok.decode(tok.encode(" The grass")[:1]).startswith(" ")
    return tok


def _prompt(tok, s) -> str:
    return tok.decode(s.ids[: s.target.index(True)])


def _between_words(prompt: str, pattern: re.Pattern, sentences: bool,
                   corpus: str | None = None) -> None:
    """Each piece follows the end of a word (`sentences`: of a sentence), another piece or the
    start, and is followed by whitespace; the haystack starts a sentence (of the filler, or
    of `corpus`: after a sentence's end or a line break)."""
    pieces = list(pattern.finditer(prompt))
    assert pieces
    ends = {m.end() for m in pieces}
    for m in pieces:
        before = prompt[: m.start()]
        if m.start() in ends or not before.strip():
            continue
        assert not before[-1].isspace(), (before[-30:], m.group())
        if sentences:
            assert before.endswith("."), (before[-30:], m.group())
    for m in pieces:
        assert prompt[m.end()].isspace(), (m.group(), prompt[m.end() : m.end() + 20])
    start = " " + prompt.lstrip(" ")
    while (m := pattern.match(start)) is not None:  # pieces at depth 0 first
        start = start[m.end() :]
    start = start.lstrip(" ")[:40]
    if corpus is None:
        assert start[0].isupper(), start
    elif not start.startswith("\n"):
        at = corpus.index(start)
        assert at == 0 or corpus[:at].rstrip(" ")[-1] in ".!?'\"\n", start


@pytest.mark.parametrize("haystack, L", [("filler", 4096), ("shakespeare", 1024)])
@pytest.mark.parametrize("which", ["bytes", "bpe"])
def test_needles_never_split_a_word(haystack, L, which, bpe):
    """RULER inserts needles between sentences (niah.py); a cut at round(depth * length) put
    them inside words ("the quiThe pass key of baku is 4821.ck"). The filler's sentences are
    short enough at 4096 tokens for every needle to sit between two of them."""
    tok = BYTES if which == "bytes" else bpe
    task = Needles(tok, L, 4, "multikey", 3, distractors=2, haystack=haystack)
    corpus = corpora.read(haystack, "val") if haystack != "filler" else None
    for seed in range(6):
        for depth in (0.0, 0.3, 0.5, 0.77, 1.0, None):
            s = task.sample(seed, depth)
            assert len(s.ids) == L and s == task.sample(seed, depth)
            _between_words(_prompt(tok, s), NEEDLE, haystack == "filler", corpus)


@pytest.mark.parametrize("which", ["bytes", "bpe"])
def test_chains_never_split_a_word(which, bpe):
    tok = BYTES if which == "bytes" else bpe
    task = VariableTracking(tok, 2048, 4, hops=4, chains=2)
    for seed in range(6):
        s = task.sample(seed)
        assert len(s.ids) == 2048
        _between_words(_prompt(tok, s), STATEMENT, sentences=True)


@pytest.mark.parametrize("which", ["bytes", "bpe"])
def test_the_asked_needle_stays_near_its_depth(which, bpe):
    """Moving to a sentence boundary costs at most SNAP of the haystack (RULER's depth step)."""
    tok = BYTES if which == "bytes" else bpe
    task = Needles(tok, 4096, 4, "multikey", 2)
    for depth in (0.0, 0.25, 0.5, 0.9, 1.0):
        s = task.sample(11, depth)
        text = _prompt(tok, s)
        at = len(tok.encode(text[: text.index(f" is {s.answers[0]}.")]))
        assert abs(at / (len(s.ids) - task.budget) - depth) < SNAP + 0.01


@pytest.mark.parametrize("L, times, rare", [(1024, 6, 1), (4096, 30, 3)])
def test_common_words_are_as_frequent_as_rulers(L, times, rare):
    """common_words_extraction.py: 6 to 1 below 4096 tokens, 30 to 3 from 4096 on."""
    s = CommonWords(BYTES, L, 4, words=3).sample(2)
    counts = Counter(_prompt(BYTES, s).split("What")[0].split())
    assert {counts[w] for w in s.answers} == {times}
    assert Counter(c for w, c in counts.items() if w not in s.answers).most_common(1)[0][0] == rare


def test_frequent_words_are_counted_as_ruler_counts_them():
    """freq_words_extraction.py: rank k appears N k^-2 / zeta(2) times, the same counts in
    every sample; the answer, the most frequent words, most frequent first."""
    task = FrequentWords(BYTES, 4096, 4, words=3)
    profiles = set()
    for seed in range(4):
        s = task.sample(seed)
        ranked = Counter(_prompt(BYTES, s).split("What")[0].split()).most_common()
        assert tuple(w for w, _ in ranked[:3]) == s.answers
        counts = [c for _, c in ranked]
        assert [round(counts[0] / c) for c in counts[1:4]] == [4, 9, 16]
        profiles.add(tuple(counts))
    assert len(profiles) == 1


def test_frequent_words_that_would_tie_are_refused_not_drawn_forever(cli, monkeypatch, tmp_path):
    """Ten words at 400 tokens cannot have ten distinct counts: drawing again until they did
    never ended."""
    monkeypatch.setattr("fsc.scale.evaluation.model_to_score", lambda *a: pytest.fail("loaded"))
    r = cli("eval", "tiny_attn", "--task", "fwe", "--words", "10", "--lengths", "400",
            "--store", tmp_path / "store")
    err = " ".join(r.err.split())
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "--lengths 400 is too short for a fwe prompt with --words 10" in err
    assert "at most --words 5 at this length" in err
    with pytest.raises(UsageError, match="at most --words 3"):
        FrequentWords(BYTES, 256, 4, words=5)
