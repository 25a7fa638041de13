"""Synthetic tasks, generated on the fly from a seed: passkey, mqar and copy.

Every sample is exactly L tokens laid out in blocks of G: a prompt whose length is a multiple
of G, then the answer, padded to whole blocks. `target` marks the answer's positions: the
positions training masks and scores, and the ones evaluation decodes. `score` marks the
positions an exact-match check compares (the key's digits, without the padding).

A sample depends only on (seed, index) and the task's knobs, so the n-th batch of a run is the
same whether the run was resumed or not. Pure Python: no torch.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from itertools import cycle, islice

from fsc.errors import UsageError

FILLER = ("The grass is green. The sky is blue. The sun is yellow. Here we go. "
          "There and back again. ")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
COPY_ALPHABET = "abcdefghijklmnop"
KEY_DIGITS = 4  # the shortest default pass key
MAX_KEY_DIGITS = 64


@dataclass(frozen=True)
class Sample:
    ids: list[int]
    target: list[bool]  # positions training masks and scores (the answer)
    score: list[bool]  # positions exact match compares (a subset of target)
    depth: float | None = None  # where the needle sits, 0 (start) .. 1 (end)
    pairs: int | None = None
    answers: tuple[str, ...] = ()  # what a RULER-style score looks for in the decoded answer


class Layout:
    """Token pieces aligned to blocks of G with one pad token."""

    def __init__(self, tokenizer, G: int):
        self.tok, self.G = tokenizer, G
        self.unit = tokenizer.encode(FILLER)  # the filler text, encoded once
        pad = tokenizer.encode(" ")
        self.pad = pad[0] if pad else 0

    def enc(self, text: str) -> list[int]:
        return self.tok.encode(text)

    def right(self, ids: list[int]) -> list[int]:
        """`ids` padded on the right to whole blocks."""
        return ids + [self.pad] * (-len(ids) % self.G)

    def left(self, ids: list[int]) -> list[int]:
        """`ids` padded on the left to whole blocks."""
        return [self.pad] * (-len(ids) % self.G) + ids

    def filler(self, n: int, rng: random.Random) -> list[int]:
        """n tokens of the repeated filler text, from a point of it that `rng` draws: every part
        of the text appears in training however short its haystacks (from the start each time,
        a haystack shorter than the text would never show its end, which longer evaluation
        prompts are made of)."""
        start = rng.randrange(len(self.unit))
        return list(islice(cycle(self.unit), start, start + n))


def _sample(prompt: list[int], answer: list[int], n_score: int, **facts) -> Sample:
    ids = prompt + answer
    target = [False] * len(prompt) + [True] * len(answer)
    score = [False] * len(prompt) + [True] * n_score + [False] * (len(answer) - n_score)
    return Sample(ids, target, score, **facts)


def key_digits(G: int) -> int:
    """The default pass key length at block size G: the smallest multiple of G that is at
    least KEY_DIGITS, so the key fills its answer blocks."""
    return -(-KEY_DIGITS // G) * G


class Passkey:
    """A d-digit pass key at a depth in a haystack of filler, then the question; the answer is
    the key's digits, padded to whole blocks (no padding when d is a multiple of G, as the
    default d is). The question ends "The pass key is" on a block boundary, so every answer
    block the frontier objective draws holds key digits: with a full stop or padding there a
    block could hold one digit and nothing to learn.

    `needle=True` also supervises the key where the needle repeats it ("… Remember it. 4821
    is the pass key."), a copy from a few tokens back (training only: it is not scored, and
    evaluation's layout leaves it out)."""

    name = "passkey"

    def __init__(self, tokenizer, L: int, G: int, digits: int | None = None,
                 needle: bool = False, option: str = "--seq-len"):
        digits = key_digits(G) if digits is None else digits
        if not 1 <= digits <= MAX_KEY_DIGITS:
            raise UsageError(f"--needle-digits {digits} must be between 1 and {MAX_KEY_DIGITS}")
        self.lay, self.L, self.digits, self.needle = Layout(tokenizer, G), L, digits, needle
        key = "0" * digits
        self.question = self.lay.enc(" What is the pass key? The pass key is ")
        need = len(self._needle(key)[0]) + len(self.question) + len(self.lay.right(self.lay.enc(key)))
        if L < need:
            raise TooShort(f"{option} {L} is shorter than a passkey prompt with a "
                           f"{digits}-digit needle ({tokens_needed(need, G)})", need)

    def _needle(self, key: str) -> tuple[list[int], int]:
        """(the needle's tokens, where its repeat of the key starts)."""
        head = self.lay.enc(f" The pass key is {key}. Remember it. ")
        return head + self.lay.enc(f"{key} is the pass key. "), len(head)

    def evaluated(self) -> Passkey:
        """The task as evaluation lays it out: the answer alone supervised."""
        return Passkey(self.lay.tok, self.L, self.lay.G, self.digits) if self.needle else self

    def sample(self, seed: int, depth: float | None = None) -> Sample:
        rng = random.Random(seed)
        key = "".join(rng.choice("0123456789") for _ in range(self.digits))
        depth = rng.random() if depth is None else depth
        (needle, repeat), core = self._needle(key), self.lay.enc(key)
        answer = self.lay.right(core)
        room = self.L - len(needle) - len(self.question) - len(answer)
        at = round(depth * room)
        hay = self.lay.filler(room, rng)
        prompt = hay[:at] + needle + hay[at:] + self.question
        s = _sample(prompt, answer, len(core), depth=depth)
        if not self.needle:
            return s
        target, start = list(s.target), at + repeat
        target[start : start + len(core)] = [True] * len(core)
        return replace(s, target=target)


class TooShort(UsageError):
    """A length too short for a task's prompts, which need `need` tokens."""

    def __init__(self, message: str, need: int):
        super().__init__(message)
        self.need = need


def tokens_needed(need: int, G: int) -> str:
    """How a message says a prompt needs `need` tokens at block size G, with the shortest
    length that holds it: a multiple of G ("101 tokens at G = 4; 104 is the shortest that fits")."""
    said = f"{need} tokens at G = {G}"
    return said if need % G == 0 else f"{said}; {-(-need // G) * G} is the shortest that fits"


class MQAR:
    """Multi-query associative recall: key:value pairs, a gap of filler, then every key asked
    again (in a shuffled order), each answer in a block of its own."""

    name = "mqar"

    def __init__(self, tokenizer, L: int, G: int, pairs: int = 8, option: str = "--seq-len"):
        if not 1 <= pairs <= len(LETTERS) ** 2:
            raise UsageError(f"--pairs {pairs} must be between 1 and {len(LETTERS) ** 2}")
        self.lay, self.L, self.pairs, self.option = Layout(tokenizer, G), L, pairs, option
        need = self._need(*self._layout(random.Random(0), 0))
        if L < need:
            raise TooShort(f"{option} {L} is shorter than an mqar sample with {pairs} pairs "
                           f"({tokens_needed(need, G)})", need)

    @staticmethod
    def _need(head, queries) -> int:
        """Tokens of a sample of these pairs and queries: the head (its gap included), then
        each query's question and answer block."""
        return len(head) + sum(len(ask) + len(answer) for ask, answer, _ in queries)

    def _layout(self, rng: random.Random, gap: int):
        keys = rng.sample([a + b for a in LETTERS for b in LETTERS], self.pairs)
        values = [f"{rng.randrange(100):02d}" for _ in keys]
        head = self.lay.enc("".join(f"{k}:{v} " for k, v in zip(keys, values)))
        head = self.lay.left(head + self.lay.filler(gap, rng))
        queries = []
        for i in rng.sample(range(self.pairs), self.pairs):
            ask = self.lay.left(self.lay.enc(f" {keys[i]}:"))
            core = self.lay.enc(values[i])
            queries.append((ask, self.lay.right(core), len(core)))
        return head, queries

    def sample(self, seed: int) -> Sample:
        gap = self.L - self._need(*self._layout(random.Random(seed), 0))
        if gap < 0:  # a tokenizer that spends more tokens on this draw than on the checked one
            raise UsageError(f"{self.option} {self.L} is too short for this mqar sample "
                             f"({self.L - gap} tokens)")
        head, queries = self._layout(random.Random(seed), gap)
        ids, target, score = list(head), [False] * len(head), [False] * len(head)
        for ask, answer, n_score in queries:
            ids += ask + answer
            target += [False] * len(ask) + [True] * len(answer)
            score += [False] * len(ask) + [True] * n_score + [False] * (len(answer) - n_score)
        assert len(ids) == self.L, (len(ids), self.L)
        return Sample(ids, target, score, pairs=self.pairs)


class Copy:
    """Random letters, a separator block, then the same letters again (the answer)."""

    name = "copy"

    def __init__(self, tokenizer, L: int, G: int, option: str = "--seq-len"):
        self.lay, self.L, self.G = Layout(tokenizer, G), L, G
        self.sep = self.lay.left(self.lay.enc("|"))
        self.n = (L - len(self.sep)) // 2 // G * G
        if self.n < 1:
            raise UsageError(f"{option} {L} is too short to copy anything at G = {G}")
        self.symbols = [self.lay.enc(c)[0] for c in COPY_ALPHABET]  # one token each

    def sample(self, seed: int) -> Sample:
        rng = random.Random(seed)
        src = [rng.choice(self.symbols) for _ in range(self.n)]
        front = [self.lay.pad] * (self.L - 2 * self.n - len(self.sep))
        return _sample(front + src + self.sep, src, self.n)


TASKS = {"passkey": Passkey, "mqar": MQAR, "copy": Copy}
