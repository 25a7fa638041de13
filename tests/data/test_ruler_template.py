"""The suite's prompts in RULER's own words (template "ruler"): its instruction before the
context, its question and answer prefix after it (scripts/data/synthetic/constants.py, copied
here as literal text), niah's needle sentence and singular wording, cwe's numbered list, fwe's
noise word at rank 1; every sample still exactly L tokens, under a byte-level tokenizer and a
BPE one."""

import re
from collections import Counter

import pytest

from fsc.data.ruler import (
    CommonWords,
    FrequentWords,
    Needles,
    RulerOptions,
    VariableTracking,
    suite_task,
)
from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer, HFTokenizer
from tests.data.test_ruler_fidelity import _between_words
from tests.imports.published import save_bpe_tokenizer

BYTES = ByteTokenizer()
NEEDLE = re.compile(r" One of the special magic numbers for \w+ is: \d+\.")
PLURAL = ("Some special magic numbers are hidden within the following text. Make sure to "
          "memorize it. I will quiz you about the numbers afterwards.\n")
SINGULAR = ("A special magic number is hidden within the following text. Make sure to memorize "
            "it. I will quiz you about the number afterwards.\n")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return HFTokenizer(save_bpe_tokenizer(tmp_path_factory.mktemp("bpe")), need_mask=False)


def _split(tok, s) -> tuple[str, str]:
    """(the prompt's text, the answer's), the answer's padding stripped."""
    at = s.target.index(True)
    return tok.decode(s.ids[:at]), tok.decode(s.ids[at:]).rstrip(" ")


@pytest.mark.parametrize("which", ["bytes", "bpe"])
@pytest.mark.parametrize("variant, needles, head, asks", [
    ("single", None, SINGULAR, "What is the special magic number for {q} mentioned in the "
     "provided text? The special magic number for {q} mentioned in the provided text is"),
    ("multikey", 3, SINGULAR, "What is the special magic number for {q} mentioned in the "
     "provided text? The special magic number for {q} mentioned in the provided text is"),
    ("multivalue", 3, PLURAL, "What are all the special magic numbers for {q} mentioned in the "
     "provided text? The special magic numbers for {q} mentioned in the provided text are"),
    ("multiquery", 3, PLURAL, "What are all the special magic numbers for {q} mentioned in the "
     "provided text? The special magic numbers for {q} mentioned in the provided text are"),
])
def test_needles_read_as_rulers(which, variant, needles, head, asks, bpe):
    tok = BYTES if which == "bytes" else bpe
    task = Needles(tok, 1024, 4, variant, needles, distractors=1, template="ruler")
    for seed in range(3):
        s = task.sample(seed)
        prompt, answer = _split(tok, s)
        assert len(s.ids) == 1024 and prompt.startswith(head)
        keys = re.findall(r"for (\w+) is: (\d+)\.", prompt)
        assert len(keys) == (needles or 1) + 1  # and the distractor
        asked = [k for k, v in keys if v in s.answers]
        query = asked[0] if len(set(asked)) == 1 else (
            ", ".join(sorted(set(asked), key=prompt.index)[:-1]))
        if variant == "multiquery":  # RULER's list: "a, b, and c", in the order asked
            named = re.search(r"numbers for (.+?) mentioned", prompt.split("\n")[-1]).group(1)
            assert sorted(named.replace(", and ", ", ").split(", ")) == sorted(set(asked))
            query = named
        assert prompt.endswith("\n" + asks.format(q=query))
        assert answer == " " + ", ".join(s.answers)
        _between_words(prompt[len(head):].split("\nWhat")[0], NEEDLE, sentences=True)


def test_a_supervised_needle_repeats_in_rulers_sentence():
    task = Needles(BYTES, 1024, 4, "multikey", 2, needle=True, template="ruler")
    s = task.sample(1)
    said = [BYTES.decode([t for t, m in zip(s.ids, s.target, strict=True) if m][:4])]
    assert re.search(r"is: (\d+), \1\.", BYTES.decode(s.ids)) and said[0].isdigit()
    assert task.evaluated().sample(1).target.count(True) == task.budget


def test_variable_tracking_reads_as_rulers():
    task = VariableTracking(BYTES, 1024, 4, hops=3, chains=2, template="ruler")
    s = task.sample(0)
    prompt, answer = _split(BYTES, s)
    value = re.search(rf"VAR ({s.answers[0]}) = (\d+)\.", prompt)
    assert prompt.startswith("Memorize and track the chain(s) of variable assignment hidden in "
                             "the following text.\n\n")
    assert prompt.endswith(
        f"\nQuestion: Find all variables that are assigned the value {value.group(2)} in the "
        "text above. Answer: According to the chain(s) of variable assignment in the text "
        f"above, 4 variables are assigned the value {value.group(2)}, they are: ")
    assert value.group(1) == s.answers[0] and answer == " ".join(s.answers)


@pytest.mark.parametrize("which", ["bytes", "bpe"])
@pytest.mark.parametrize("L, times, rare", [(1024, 6, 1), (4096, 30, 3)])
def test_common_words_are_a_numbered_list(which, L, times, rare, bpe):
    tok = BYTES if which == "bytes" else bpe
    s = CommonWords(tok, L, 4, words=3, template="ruler").sample(2)
    prompt, answer = _split(tok, s)
    head = ("Below is a numbered list of words. In these words, some appear more often than "
            "others. Memorize the ones that appear most often.\n")
    ask = ("\nQuestion: What are the 3 most common words in the above list? Answer: The top 3 "
           "words that appear most often in the list are:")
    assert len(s.ids) == L and prompt.startswith(head) and prompt.endswith(ask)
    listed = prompt[len(head) : -len(ask)].strip(" ")
    items = re.findall(r"(\d+)\. (\w+)", listed)
    assert " ".join(f"{i}. {w}" for i, w in items) == listed  # nothing else in the list
    assert [int(i) for i, _ in items] == list(range(1, len(items) + 1))
    counts = Counter(w for _, w in items)
    assert {counts[w] for w in s.answers} == {times}
    assert max(c for w, c in counts.items() if w not in s.answers) == rare
    assert answer == " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(s.answers))
    spare = L - len(tok.encode(prompt)) - len(tok.encode(answer))
    assert spare < 4 * len(tok.encode(" 999. abc"))  # the room is used


def test_frequent_words_put_rulers_noise_word_first():
    """freq_words_extraction.py: vocab[0] = '...', the answer ranks 2 to 4."""
    task = FrequentWords(BYTES, 4096, 4, words=3, template="ruler")
    s = task.sample(0)
    prompt, answer = _split(BYTES, s)
    assert prompt.startswith("Read the following coded text and track the frequency of each "
                             "coded word. Find the three most frequently appeared coded words. ")
    assert prompt.endswith(
        "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are "
        "the three most frequently appeared words in the above coded text? Answer: According "
        "to the coded text above, the three most frequently appeared words are:")
    ranked = Counter(prompt.split("words. ", 1)[1].split("\nQuestion")[0].split()).most_common()
    assert ranked[0][0] == "..." and tuple(w for w, _ in ranked[1:4]) == s.answers
    assert [round(ranked[0][1] / c) for _, c in ranked[1:4]] == [4, 9, 16]
    assert answer == " " + " ".join(s.answers)
    assert "the five most" in BYTES.decode(FrequentWords(BYTES, 4096, 4, words=5,
                                                         template="ruler").sample(0).ids)


def test_the_noise_word_moves_the_tie_check_one_rank_down():
    """Three ranks asked at 448 tokens: ranks 1..4 are distinct without noise; with the noise
    word at rank 1, ranks 2..5 must be, and are not."""
    FrequentWords(BYTES, 448, 4, words=3)
    with pytest.raises(UsageError, match=r"would tie \(at most --words 2 at this length\)"):
        FrequentWords(BYTES, 448, 4, words=3, template="ruler")


@pytest.mark.parametrize("task", ["niah", "vt", "cwe", "fwe"])
def test_the_template_reaches_every_task_and_a_wrong_one_is_one_line(task):
    s = suite_task(task, BYTES, 2048, 4, RulerOptions(template="ruler")).sample(0)
    plain = suite_task(task, BYTES, 2048, 4, RulerOptions()).sample(0)
    assert len(s.ids) == len(plain.ids) == 2048
    assert BYTES.decode(s.ids).split()[0] in ("A", "Memorize", "Below", "Read")
    with pytest.raises(UsageError, match=r"^--template 'RULER' is not one of fsc, ruler$"):
        suite_task(task, BYTES, 2048, 4, RulerOptions(template="RULER"))


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_template_at_the_command_line(cli, tmp_path):
    """fsc train --template ruler records it, fsc eval scores the checkpoint with it unless
    told otherwise, the rows carry it, the plain passkey stays apart from RULER's niah single,
    and a template the data or task does not read is refused in one line."""
    import json

    store, ck = tmp_path / "store", tmp_path / "ck"
    assert cli("train", "tiny_attn", "--data", "cwe", "--template", "ruler", "--seq-len", "512",
               "--batch", "2", "--train-steps", "1", "--out", ck, "--store", store).code == 0
    assert cli("eval", ck, "--lengths", "512", "--samples", "1", "--store", store).code == 0
    for template in ("ruler", "fsc"):
        assert cli("eval", ck, "--task", "niah", "--template", template, "--lengths", "512",
                   "--samples", "1", "--depths", "0.5", "--store", store).code == 0
    rows = json.loads(cli("query", "select task, template, score, accuracy, answers from "
                          "evaluation order by all", "--json", "--store", store).out)
    assert [(r["task"], r["template"]) for r in rows] == [
        ("cwe", "ruler"), ("niah", "fsc"), ("niah", "ruler")]
    plot = cli("plot", "niah", "--json", "--out", tmp_path / "n.png", "--store", store)
    assert plot.code == 0 and json.loads(plot.out)["rows"] == 1  # the plain passkey's cell
    for args, says in ((("train", "tiny_attn", "--data", "shakespeare", "--template", "ruler",
                         "--seq-len", "64", "--train-steps", "1", "--out", tmp_path / "x"),
                        "--template: for --data niah_multikey"),
                       (("eval", ck, "--task", "mqar", "--template", "ruler"),
                        "--template: for --task niah, vt, cwe, fwe or ruler only (this is mqar)"),
                       (("eval", ck, "--template", "RULER"),
                        "--template 'RULER' is not one of fsc, ruler")):
        r = cli(*args, "--store", store)
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
        assert says in " ".join(r.err.split())
