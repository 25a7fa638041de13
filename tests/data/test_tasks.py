"""Synthetic tasks and text data: exact lengths, block-aligned answers, seeded samples, and
bad data sources refused in one line."""

import json
import random

import pytest

from fsc.data.sources import DataOptions, open_data, open_lengths
from fsc.data.tasks import FILLER, MQAR, Copy, Passkey
from fsc.errors import UsageError
from fsc.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


def _aligned(sample, G):
    """The answer starts at a block boundary and fills whole blocks."""
    first = sample.target.index(True)
    return first % G == 0 and len(sample.ids) % G == 0


@pytest.mark.parametrize("make", [lambda: Passkey(TOK, 256, 4, 5), lambda: MQAR(TOK, 256, 4, 6),
                                  lambda: Copy(TOK, 32, 4), lambda: Passkey(TOK, 1024, 8, 7)])
def test_samples_are_exact_aligned_and_seeded(make):
    task = make()
    a, b, c = task.sample(1), task.sample(1), task.sample(2)
    assert a == b and a.ids != c.ids
    assert len(a.ids) == task.L == len(a.target) == len(a.score)
    assert all(t for t, s in zip(a.target, a.score) if s)  # scored positions are answers
    assert any(a.score)
    assert _aligned(a, task.lay.G)


def test_passkey_answer_is_the_needle_and_depth_moves_it():
    task = Passkey(TOK, 512, 4, 5)
    early, late = task.sample(3, depth=0.0), task.sample(3, depth=1.0)
    key = TOK.decode([i for i, s in zip(early.ids, early.score) if s])
    assert len(key) == 5 and key.isdigit()
    text_early, text_late = TOK.decode(early.ids), TOK.decode(late.ids)
    assert text_early.index(f"pass key is {key}") < 10
    assert text_late.index(f"pass key is {key}") > 300
    # the answer is the key alone, padded to whole blocks (5 digits at G = 4: 3 pads)
    assert text_early.endswith(f"The pass key is {key}   ")


def _runs(flags):
    """[start, end) of each run of True in `flags`."""
    edges = [i for i in range(len(flags) + 1)
             if (i < len(flags) and flags[i]) != (i > 0 and flags[i - 1])]
    return list(zip(edges[::2], edges[1::2]))


@pytest.mark.parametrize("G", [1, 2, 3, 4, 8, 16])
@pytest.mark.parametrize("digits", [None, 1, 4, 5, 8, 12])
def test_the_key_fills_whole_answer_blocks(G, digits):
    """Every key digit is scored, the answer is the key alone in whole blocks starting on a
    block boundary, padding only when the digits are not a multiple of G; the default key
    fills its blocks exactly."""
    task = Passkey(TOK, -(-256 // G) * G, G, digits)  # L a multiple of G
    assert task.digits == (digits or -(-4 // G) * G)
    for seed in range(5):
        s = task.sample(seed)
        [(a, b)] = _runs(s.target)
        [(c, d)] = _runs(s.score)
        assert a % G == 0 and b == len(s.ids) and (b - a) % G == 0
        assert (c, d) == (a, a + task.digits)  # the key's digits are the scored positions
        assert b - a == -(-task.digits // G) * G  # no block without a key digit
        key = TOK.decode(s.ids[c:d])
        assert key.isdigit() and f"The pass key is {key}. Remember it." in TOK.decode(s.ids)
        assert set(s.ids[d:b]) <= {TOK.encode(" ")[0]}
    if digits is None:
        assert task.digits % G == 0 and task.digits >= 4


def test_supervising_the_needle_adds_its_repeat_of_the_key_to_the_target():
    task = Passkey(TOK, 256, 4, needle=True)
    plain = task.evaluated()
    assert plain.evaluated() is plain and not plain.needle
    for seed in range(5):
        s, e = task.sample(seed), plain.sample(seed)
        assert s.ids == e.ids and s.score == e.score and s.depth == e.depth
        (r0, r1), answer = _runs(s.target)
        assert [answer] == _runs(e.target)
        key = TOK.decode(s.ids[r0:r1])
        assert TOK.decode(s.ids[r0 - 13 : r1 + 16]) == f"Remember it. {key} is the pass key"
        assert key == TOK.decode(s.ids[answer[0] : answer[1]])


def test_mqar_answers_are_the_values_of_the_asked_keys():
    task = MQAR(TOK, 256, 4, 5)
    s = task.sample(7)
    text = TOK.decode(s.ids)
    pairs = dict(p.split(":") for p in text.split()[:5])
    starts = [i for i in range(1, len(s.ids)) if s.score[i] and not s.score[i - 1]]
    assert len(starts) == 5 == len(pairs)
    for a in starts:  # each answer block follows its query " k:" in the block before
        assert TOK.decode(s.ids[a - 1 : a]) == ":"
        assert pairs[TOK.decode(s.ids[a - 3 : a - 1])] == TOK.decode(s.ids[a : a + 2])


def test_short_haystacks_show_all_of_the_filler_text():
    """At 128 tokens a haystack holds 27 filler tokens, well short of the 88-token text
    repeated in longer prompts: drawn from the start each time, training would never show the
    text's end, which evaluation's longer haystacks are made of. Every window of the text
    shows up in some haystack, and the key and depth are those drawn before."""
    task, unit = Passkey(TOK, 128, 4), FILLER * 2
    texts = [TOK.decode(task.sample(seed).ids) for seed in range(200)]
    for i in range(len(FILLER)):
        assert any(unit[i : i + 8] in t for t in texts), unit[i : i + 8]
    for seed in range(20):  # the haystack's start is drawn after the key and the depth
        rng = random.Random(seed)
        key = "".join(rng.choice("0123456789") for _ in range(4))
        s = task.sample(seed)
        assert s.depth == rng.random() and TOK.decode(s.ids[-4:]) == key
        assert f" The pass key is {key}. Remember it. " in TOK.decode(s.ids)


def test_too_short_lengths_say_what_they_need():
    with pytest.raises(UsageError, match="--seq-len 64 is shorter than a passkey prompt"):
        Passkey(TOK, 64, 4, 5)
    with pytest.raises(UsageError, match="mqar sample with 40 pairs"):
        MQAR(TOK, 128, 4, 40)
    with pytest.raises(UsageError, match=r"--seq-len 64 is shorter than an mqar sample with 8 "
                                         r"pairs \(112 tokens at G = 4\)"):
        MQAR(TOK, 64, 4, 8)  # the head alone fits; the queries after it do not
    assert len(MQAR(TOK, 112, 4, 8).sample(0).ids) == 112


def test_text_files_pack_into_sequences(tmp_path):
    (tmp_path / "a.txt").write_text(" ".join(f"w{i:03d}" for i in range(96)) + " ")
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps({"body": f"doc {i} " * 9})
                                                for i in range(10)))
    txt = open_data(str(tmp_path / "a.txt"), TOK, 32, 4, 0)
    assert txt.n == (5 * 96 + 1) // 32
    seen = {tuple(txt.sample(i).ids) for i in range(txt.n)}  # an epoch visits each once
    assert len(seen) == txt.n and all(len(s) == 32 for s in seen)
    assert txt.sample(0) == open_data(str(tmp_path / "a.txt"), TOK, 32, 4, 0).sample(0)
    js = open_data(str(tmp_path / "a.jsonl"), TOK, 16, 4, 0, DataOptions(text_field="body"))
    assert js.sample(0).target == [True] * 16


def test_training_cuts_text_at_a_fresh_offset_each_epoch(tmp_path):
    """Training's text: epoch 0 cut as evaluation cuts it, each later epoch at a seeded offset,
    read as a ring, so the tail short of a whole sequence is read too; evaluation's cuts stay."""
    (tmp_path / "a.txt").write_text(" ".join(f"w{i:03d}" for i in range(100)))
    stream = _chars(TOK.encode((tmp_path / "a.txt").read_text()) + [TOK.eos_id]) * 2  # the ring
    L = 32
    train = open_lengths(str(tmp_path / "a.txt"), TOK, [[L, 1]], 4, 0)
    held = open_data(str(tmp_path / "a.txt"), TOK, L, 4, 0)
    n = train.n
    assert n == held.n and len(stream) // 2 % L  # a tail short of a sequence
    epochs = [[_chars(train.sample(e * n + i).ids) for i in range(n)] for e in range(6)]
    cuts = [{stream.index(w) for w in ws} for ws in epochs]  # where each sequence starts
    assert epochs[0] == [_chars(held.sample(i).ids) for i in range(n)]
    assert cuts[0] == {i * L for i in range(n)}
    offsets = [min(c) for c in cuts]
    assert all(c == {o + i * L for i in range(n)} for c, o in zip(cuts, offsets, strict=True))
    assert len(set(offsets[1:])) > 1 and all(0 <= o < L for o in offsets)
    tail = range(n * L, len(stream) // 2)
    assert any(any(o + i * L <= t < o + (i + 1) * L for i in range(n) for t in tail)
               for o in offsets[1:])  # some epoch reads the tail
    assert {_chars(held.sample(n + i).ids) for i in range(n)} == set(epochs[0])  # eval: no shift
    fresh = open_lengths(str(tmp_path / "a.txt"), TOK, [[L, 1]], 4, 0)  # as a resumed run reads
    assert _chars(fresh.sample(3 * n + 2).ids) == epochs[3][2]


def _chars(ids: list[int]) -> str:
    return "".join(map(chr, ids))


def test_parquet_is_read_through_duckdb(tmp_path):
    import duckdb

    path = tmp_path / "t.parquet"
    duckdb.sql(f"COPY (SELECT 'row ' || i AS text FROM range(50) t(i)) TO '{path}' (FORMAT parquet)")
    data = open_data(str(path), TOK, 16, 4, 0)
    assert data.n == sum(len(f"row {i}") + 1 for i in range(50)) // 16
    with pytest.raises(UsageError, match="no column 'body'"):
        open_data(str(path), TOK, 16, 4, 0, DataOptions(text_field="body"))


@pytest.mark.parametrize("name, content, message", [
    ("missing.txt", None, "no such file"),
    ("bad.parquet", b"not parquet at all", "not a readable parquet file"),
    ("bad.jsonl", b'{"text": "ok"}\n{oops\n', "bad.jsonl:2: not a JSON line"),
    ("field.jsonl", b'{"body": "x"}\n', "no text field 'text'"),
    ("short.txt", b"tiny", "fewer than one sequence"),
    ("empty.txt", b"", "empty.txt: holds no text"),
    ("empty.jsonl", b'{"text": ""}\n', "empty.jsonl: holds no text"),
    ("latin1.txt", b"caf\xe9", "not UTF-8"),
    # a file of another suffix: said so (it was "is not one of passkey, mqar, copy, ...")
    ("data.csv", b"a,b\n", r"data.csv: a file is read by its suffix, .txt, .jsonl, .parquet "
                           r"\(.csv is none of them\); name plain text .txt"),
    ("notes", b"text\n", r"notes: a file is read by its suffix, .* \(it has none\)"),
])
def test_bad_data_is_one_usage_error(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(UsageError, match=message):
        open_data(str(path), TOK, 32, 4, 0)
