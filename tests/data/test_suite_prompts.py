"""The RULER-style suite's prompts: exact lengths, answers in whole blocks after a prompt of
whole blocks, the answers present where the prompt says, seeded, and what cannot fit refused
in one line naming the option."""

import re
from collections import Counter

import pytest

from fsc.data.ruler import (
    COMMON_TIMES,
    CommonWords,
    FrequentWords,
    Needles,
    VariableTracking,
    found,
)
from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()
MAKERS = {
    "single+distractors": lambda L: Needles(TOK, L, 4, "single", distractors=2),
    "multikey": lambda L: Needles(TOK, L, 4, "multikey"),
    "multivalue": lambda L: Needles(TOK, L, 4, "multivalue", 3),
    "multiquery": lambda L: Needles(TOK, L, 4, "multiquery", 3, distractors=1),
    "vt": lambda L: VariableTracking(TOK, L, 4, hops=3, chains=2),
    "cwe": lambda L: CommonWords(TOK, L, 4, words=3),
    "fwe": lambda L: FrequentWords(TOK, L, 4, words=2),
    "shakespeare": lambda L: Needles(TOK, L, 4, "multikey", haystack="shakespeare"),
}


def _parts(task, s):
    first = s.target.index(True)
    return TOK.decode(s.ids[:first]), TOK.decode(s.ids[first:]), first


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("L", [256, 1024])
def test_samples_are_exact_aligned_seeded_and_answered(name, L):
    task = MAKERS[name](L)
    a, b, c = task.sample(1), task.sample(1), task.sample(2)
    assert a == b and a.ids != c.ids
    assert len(a.ids) == L == len(a.target) == len(a.score)
    prompt, answer, first = _parts(task, a)
    assert first % 4 == 0 and all(a.target[first:])  # the answer: whole blocks at the end
    assert answer.strip() == " ".join(a.answers) and found(answer, a.answers) == 1
    assert prompt.endswith("Answer: ")


def test_needles_hold_what_each_variant_asks():
    s = Needles(TOK, 512, 4, "multivalue", 3, distractors=2).sample(0, 0.5)
    prompt, _, _ = _parts(None, s)
    key = re.search(r"pass keys of (\w+)\?", prompt).group(1)
    values = re.findall(rf"The pass key of {key} is (\d+)\.", prompt)
    assert tuple(values) == s.answers and len(values) == 3
    assert len(re.findall(r"The pass key of \w+ is \d+\.", prompt)) == 5  # 2 distractors
    s = Needles(TOK, 512, 4, "multiquery", 3).sample(0)
    prompt, _, _ = _parts(None, s)
    asked = re.search(r"pass keys of (\w+), (\w+) and (\w+)\?", prompt).groups()
    said = dict(re.findall(r"The pass key of (\w+) is (\d+)\.", prompt))
    assert s.answers == tuple(said[k] for k in asked)
    s = Needles(TOK, 512, 4, "multikey", 5).sample(3)
    prompt, _, _ = _parts(None, s)
    said = dict(re.findall(r"The pass key of (\w+) is (\d+)\.", prompt))
    asked = re.search(r"pass key of (\w+)\?", prompt).group(1)
    assert len(said) == 5 and s.answers == (said[asked],)


def test_the_asked_needle_sits_at_the_depth():
    task = Needles(TOK, 2048, 4, "multikey", 2)
    for depth in (0.0, 0.5, 1.0):
        s = task.sample(7, depth)
        prompt, _, _ = _parts(task, s)
        at = prompt.index(f" is {s.answers[0]}.") / len(prompt)
        assert abs(at - depth) < 0.05 and s.depth == depth


def test_variable_chains_bind_every_name_to_the_value():
    s = VariableTracking(TOK, 1024, 4, hops=4, chains=2).sample(5)
    prompt, _, _ = _parts(None, s)
    value = re.search(r"hold the value (\d+)\?", prompt).group(1)
    bound, names = {}, {}
    for name, rhs in re.findall(r"VAR (\w+) = ([^.]+)\.", prompt):
        names[name] = rhs
    for name, rhs in names.items():  # statements come in chain order
        bound[name] = rhs if rhs.isdigit() else bound[rhs.removeprefix("VAR ")]
    assert len(names) == 10
    assert set(s.answers) == {n for n, v in bound.items() if v == value}
    assert len(s.answers) == 5


def test_common_and_frequent_words_are_counted_in_the_list():
    s = CommonWords(TOK, 1024, 4, words=3).sample(0)
    counts = Counter(_parts(None, s)[0].split("What")[0].split())
    top = counts.most_common()
    listed = _parts(None, s)[0].split("What")[0].split()
    assert {w for w, _ in top[:3]} == set(s.answers)
    assert top[0][1] == top[2][1] == COMMON_TIMES * top[3][1]
    assert list(s.answers) == sorted(s.answers, key=listed.index)  # as they first appear
    s = FrequentWords(TOK, 1024, 4, words=3).sample(0)
    counts = Counter(_parts(None, s)[0].split("What")[0].split())
    top = counts.most_common(4)
    assert tuple(w for w, _ in top[:3]) == s.answers and top[2][1] > top[3][1]


def test_long_word_lists_fit_once_the_pseudo_words_run_out():
    s = CommonWords(TOK, 16384, 4).sample(0)
    assert len(s.ids) == 16384 and found(_parts(None, s)[1], s.answers) == 1


def test_natural_text_haystack_is_the_corpus():
    s = MAKERS["shakespeare"](512).sample(0)
    assert "The pass key of" in TOK.decode(s.ids) and "grass is green" not in TOK.decode(s.ids)


@pytest.mark.parametrize("make, message", [
    (lambda: Needles(TOK, 128, 4, "multiquery", 8, option="--lengths"),
     "--lengths 128 is shorter than a niah multiquery prompt with 8 needles and 0 distractors"),
    (lambda: VariableTracking(TOK, 128, 4, hops=9, option="--lengths"),
     "--lengths 128 is shorter than a vt prompt with --hops 9"),
    (lambda: CommonWords(TOK, 64, 4, option="--lengths"),
     "--lengths 64 is shorter than a cwe prompt"),
    (lambda: FrequentWords(TOK, 128, 4, option="--lengths"),
     "--lengths 128 is shorter than a fwe prompt"),
    (lambda: Needles(TOK, 512, 4, "many"), "--variant 'many' is not one of single, multikey"),
    (lambda: Needles(TOK, 512, 4, "single", 3), "--needles 3: --variant single has one"),
    (lambda: Needles(TOK, 512, 4, "multikey", 0), "--needles 0 must be between 1 and 64"),
    (lambda: Needles(TOK, 512, 4, haystack="bible"), "--haystack 'bible' is not one of filler"),
    (lambda: VariableTracking(TOK, 512, 4, chains=0), "--chains 0 must be between 1 and 16"),
])
def test_what_cannot_be_made_is_one_line(make, message):
    with pytest.raises(UsageError) as e:
        make()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_found_is_rulers_fraction_of_expected_strings():
    assert found("1234 5678 9999", ("1234", "5678")) == 1
    assert found("ABC xyz", ("abc", "def")) == 0.5
    assert found("", ("1",)) == 0


def _spans(marks):
    """(start, end) of each run of True."""
    spans, start = [], None
    for i, m in enumerate([*marks, False]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


@pytest.mark.parametrize("variant, needles", [("single", 1), ("multikey", 3), ("multivalue", 2)])
def test_supervised_needles_repeat_their_value_and_train_on_the_repeat(variant, needles):
    task = Needles(TOK, 256, 4, variant, needles, distractors=1, needle=True)
    plain = task.evaluated()
    assert plain.evaluated() is plain and not plain.needle and plain.facts() == task.facts()
    for seed in range(4):
        s, e = task.sample(seed), plain.sample(seed)
        assert s.answers == e.answers and s.score[-task.budget:] == e.score[-task.budget:]
        text = TOK.decode(s.ids)
        pairs = re.findall(r"The pass key of (\w+) is (\d+), (\d+)\.", text)
        assert len(pairs) == needles + 1 and all(a == b for _, a, b in pairs)
        *repeats, answer = _spans(s.target)
        assert [TOK.decode(s.ids[a:b]) for a, b in repeats] == [v for _, _, v in pairs]
        assert all(TOK.decode(s.ids[a - 2 : a]) == ", " for a, _ in repeats)
        assert _spans(e.target) == [(len(e.ids) - task.budget, len(e.ids))]
        assert answer == (len(s.ids) - task.budget, len(s.ids))
        assert not re.search(r"is \d+, \d+", TOK.decode(e.ids))  # evaluation: no repeats


def test_supervised_chains_train_on_the_name_each_link_refers_to():
    task = VariableTracking(TOK, 256, 4, hops=3, chains=2, needle=True)
    plain = task.evaluated()
    assert not plain.needle
    for seed in range(4):
        s, e = task.sample(seed), plain.sample(seed)
        assert s.ids == e.ids and s.answers == e.answers  # the layout is the same
        *links, _ = _spans(s.target)
        assert len(_spans(e.target)) == 1 and len(links) == 2 * 3
        text = TOK.decode(s.ids)
        referred = re.findall(r"VAR [A-Z]{3} = VAR ([A-Z]{3})\.", text)
        assert sorted(TOK.decode(s.ids[a:b]) for a, b in links) == sorted(referred)
        assert all(TOK.decode(s.ids[a - 4 : a]) == "VAR " for a, _ in links)


def test_a_supervised_needle_that_does_not_fit_names_the_length():
    Needles(TOK, 112, 4, "multikey", 2)  # fits without the repeats, not with them
    with pytest.raises(UsageError, match=r"--seq-len 112 is shorter than a niah multikey "
                       r"prompt with 2 needles and 0 distractors \(115 tokens at G = 4; 116 is "
                       r"the shortest that fits\)"):
        Needles(TOK, 112, 4, "multikey", 2, needle=True)
