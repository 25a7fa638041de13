"""RULER-style long-context tasks, generated from a seed at any length (after NVIDIA's RULER,
Hsieh et al. 2024): needles in its variants (several keys of which one is asked, several
values of one key all asked, several keys asked at once; distractor needles whose keys are
never asked), variable tracking (chains `VAR ABC = 12345 … VAR DEF = VAR ABC`, the answer
every name bound to the value) and common- and frequent-word extraction (the answer needs the
whole context: which words a long list repeats most).

Every sample is exactly L tokens: a prompt whose length is a multiple of G, then the answer
padded to a fixed number of whole blocks (the same for every sample of a task, so the samples
of a cell decode together). `answers` holds what RULER's score looks for in the decoded
answer; the fraction found is the sample's score. Needles and chains sit in a haystack of the
filler text or of a shipped corpus (fsc.corpora). Pure Python: no torch.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from itertools import cycle, islice, pairwise

from fsc import corpora
from fsc.data.tasks import MAX_KEY_DIGITS, Layout, Sample, key_digits
from fsc.errors import UsageError

VARIANTS = ("single", "multikey", "multivalue", "multiquery")
HAYSTACKS = ("filler", *corpora.CORPORA)
MULTI_NEEDLES = 4  # keys (multikey, multiquery) or values (multivalue) unless --needles says
MAX_NEEDLES = 64
MAX_HOPS = 64
MAX_CHAINS = 16
MAX_WORDS = 32
VT_DIGITS = 5  # RULER's variable values
COMMON_TIMES = 3  # cwe: a common word appears this many times as often as an uncommon one
ZIPF_ALPHA = 2.0  # fwe: word ranks drawn with weight rank^-alpha, as RULER draws them
CONSONANTS, VOWELS = "bcdfghjklmnprstvz", "aeiou"
CAPITALS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class RulerOptions:
    """The suite's knobs (each task reads its own)."""

    variant: str = "single"  # niah
    needles: int | None = None  # niah: keys or values (None: 1 for single, else MULTI_NEEDLES)
    distractors: int = 0  # niah: needles whose keys are never asked
    hops: int = 4  # vt: links of each chain after its value
    chains: int = 1  # vt: chains, one asked
    words: int = 3  # cwe, fwe: words the answer names
    haystack: str = "filler"  # niah, vt: the filler text or a corpus


def _bounded(option: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise UsageError(f"{option} {value} must be between {low} and {high}")
    return value


def _words(rng: random.Random, n: int, pattern: str) -> list[str]:
    """n distinct pseudo-words of `pattern` (c: a consonant, v: a vowel, C: a capital)."""
    alphabets = [{"c": CONSONANTS, "v": VOWELS, "C": CAPITALS}[p] for p in pattern]
    size = 1
    for a in alphabets:
        size *= len(a)
    out = []
    for i in rng.sample(range(size), n):
        word = []
        for a in reversed(alphabets):
            i, r = divmod(i, len(a))
            word.append(a[r])
        out.append("".join(reversed(word)))
    return out


def _numbers(rng: random.Random, n: int, digits: int) -> list[str]:
    """n distinct numbers of `digits` digits (leading zeros kept)."""
    return [f"{v:0{digits}d}" for v in rng.sample(range(10**digits), n)]


def _placed(hay: list[int], pieces: list[tuple[float, list[int]]],
            marked: dict[int, range] | None = None) -> tuple[list[int], list[bool]]:
    """(`hay` with each piece inserted at its depth (0: the start, 1: the end), in depth order
    (pieces at one depth keep their order); the positions `marked` names in a piece (piece
    index: a range of its tokens), True)."""
    out, marks, at = [], [], 0
    for i in sorted(range(len(pieces)), key=lambda i: pieces[i][0]):
        depth, piece = pieces[i]
        cut = max(at, round(depth * len(hay)))
        out += hay[at:cut]
        span = (marked or {}).get(i, range(0))
        marks += [False] * (cut - at) + [j in span for j in range(len(piece))]
        out += piece
        at = cut
    return out + hay[at:], marks + [False] * (len(hay) - at)


_CORPUS_TOKENS: dict[tuple, tuple] = {}


class Haystack:
    """What needles sit in: the filler text from a drawn point, or a drawn window of a shipped
    corpus's `split` (eval reads the validation text, training the training text)."""

    def __init__(self, layout: Layout, spec: str = "filler", split: str = "val"):
        self.lay, self.spec, self.tokens = layout, spec, None
        if spec == "filler":
            return
        if spec not in HAYSTACKS:  # a corpus by its name: the command picks the split
            raise UsageError(f"--haystack {spec!r} is not one of {', '.join(HAYSTACKS)}"
                             + (" (fsc eval reads its validation text, fsc train its training "
                                "text)" if corpora.is_corpus(spec) else ""))
        key = (id(layout.tok), spec, split)
        held = _CORPUS_TOKENS.get(key)
        if held is None or held[0] is not layout.tok:  # encoded once per tokenizer
            held = _CORPUS_TOKENS[key] = (layout.tok, layout.enc(corpora.read(spec, split)))
        self.tokens = held[1]

    def take(self, n: int, rng: random.Random) -> list[int]:
        if self.tokens is None:
            return self.lay.filler(n, rng)
        start = rng.randrange(len(self.tokens))
        return list(islice(cycle(self.tokens), start, start + n))


class _Answered:
    """A task whose prompt ends with a question and whose answer is text padded to a fixed
    number of blocks (`budget` tokens: an answer's UTF-8 bytes, rounded up to whole blocks;
    a byte-level tokenizer never needs more tokens than bytes)."""

    name: str
    lay: Layout
    L: int
    budget: int
    option: str

    def _answer(self, text: str) -> tuple[list[int], int]:
        core = self.lay.enc(text)[: self.budget]
        return core + [self.lay.pad] * (self.budget - len(core)), len(core)

    def _sample(self, prompt: list[int], text: str, answers, repeats: list[bool] | None = None,
                **facts) -> Sample:
        """`repeats`: prompt positions trained on as well (the supervised repeats)."""
        answer, n_score = self._answer(text)
        ids = prompt + answer
        assert len(ids) == self.L, (self.name, len(ids), self.L)
        target = (repeats or [False] * len(prompt)) + [True] * len(answer)
        score = [False] * len(prompt) + [True] * n_score + [False] * (len(answer) - n_score)
        return Sample(ids, target, score, answers=tuple(answers), **facts)

    def _need(self, pieces, question) -> int:
        """Tokens of a prompt and answer with no haystack."""
        return sum(len(p) for _, p in pieces) + len(question) + self.budget

    def _room(self, pieces, question) -> int:
        """The haystack's tokens in a sample of these pieces."""
        room = self.L - self._need(pieces, question)
        if room < 0:  # a tokenizer that spends more tokens on this draw than on the checked ones
            raise UsageError(f"{self.option} {self.L} is too short for this {self.name} prompt")
        return room

    def _check_fits(self, need: int, what: str, option: str) -> None:
        if self.L < need:
            raise UsageError(f"{option} {self.L} is shorter than {what} ({need} tokens at "
                             f"G = {self.lay.G})")


class Needles(_Answered):
    """Pass keys of named keys in a haystack (" The pass key of baku is 4821."),
    then a question about some of them. single: one key asked; multikey: `needles` keys, one
    asked; multivalue: one key with `needles` values, all asked; multiquery: `needles` keys,
    all asked. `distractors` more needles of keys never asked come with any variant. The
    (first) asked needle sits at the sample's depth, the others at drawn depths.

    `needle=True` (training only) has each needle repeat its value (" The pass key of baku is
    4821, 4821."), the repeat supervised: a copy from a few tokens back that teaches
    the copy the answer needs, as passkey's needle does (fsc.data.tasks.Passkey)."""

    name = "niah"

    def __init__(self, tokenizer, L: int, G: int, variant: str = "multikey",
                 needles: int | None = None, distractors: int = 0, digits: int | None = None,
                 haystack: str = "filler", split: str = "val", option: str = "--seq-len",
                 needle: bool = False):
        if variant not in VARIANTS:
            raise UsageError(f"--variant {variant!r} is not one of {', '.join(VARIANTS)}")
        needles = (1 if variant == "single" else MULTI_NEEDLES) if needles is None else needles
        if variant == "single" and needles != 1:
            raise UsageError(f"--needles {needles}: --variant single has one needle asked "
                             "(add others with --distractors, or use multikey)")
        self.variant, self.needle, self.split = variant, needle, split
        self.needles = _bounded("--needles", needles, 1, MAX_NEEDLES)
        self.distractors = _bounded("--distractors", distractors, 0, MAX_NEEDLES)
        self.digits = _bounded("--needle-digits", key_digits(G) if digits is None else digits,
                               1, MAX_KEY_DIGITS)
        self.lay, self.L = Layout(tokenizer, G), L
        self.hay = Haystack(self.lay, haystack, split)
        asked = self.needles if variant in ("multivalue", "multiquery") else 1
        self.budget = len(self.lay.right([0] * (asked * (self.digits + 1) - 1)))
        self.option = option
        need = max(self._need(*self._parts(random.Random(s), 0.5)[:2]) for s in range(4))
        what = (f"a niah {variant} prompt with {needles} needle{'s' * (needles > 1)} and "
                f"{distractors} distractor{'s' * (distractors != 1)}")
        self._check_fits(need, what, option)

    def facts(self) -> dict:
        return {"variant": self.variant, "needles": self.needles,
                "distractors": self.distractors, "haystack": self.hay.spec}

    def evaluated(self) -> Needles:
        """The task as evaluation lays it out: the answer alone supervised."""
        if not self.needle:
            return self
        return Needles(self.lay.tok, self.L, self.lay.G, self.variant, self.needles,
                       self.distractors, self.digits, self.hay.spec, self.split, self.option)

    def _needle(self, key: str, value: str) -> tuple[list[int], range]:
        """(a needle's tokens, where its supervised repeat of the value lies)."""
        head = self.lay.enc(f" The pass key of {key} is {value}")
        if not self.needle:
            return head + self.lay.enc("."), range(0)
        head += self.lay.enc(", ")
        again = self.lay.enc(value)
        return head + again + self.lay.enc("."), range(len(head), len(head) + len(again))

    def _parts(self, rng: random.Random, depth: float):
        """(needles at their depths, the question, the values asked, the supervised repeat of
        each needle)."""
        v = self.variant
        n_keys = self.needles if v in ("multikey", "multiquery") else 1
        keys = _words(rng, n_keys + self.distractors, "cvcv")
        n_values = self.needles if v == "multivalue" else 1
        values = _numbers(rng, n_keys * n_values + self.distractors, self.digits)
        pairs = [(k, values[i * n_values + j]) for i, k in enumerate(keys[:n_keys])
                 for j in range(n_values)]
        pairs += list(zip(keys[n_keys:], values[n_keys * n_values:], strict=True))
        if v in ("single", "multikey"):
            asked = [rng.choice(keys[:n_keys])]
        elif v == "multiquery":
            asked = rng.sample(keys[:n_keys], n_keys)
        else:
            asked = keys[:1]
        first = next(i for i, (k, _) in enumerate(pairs) if k == asked[0])
        depths = [depth if i == first else rng.random() for i in range(len(pairs))]
        needles = [self._needle(k, val) for k, val in pairs]
        pieces = [(d, ids) for d, (ids, _) in zip(depths, needles, strict=True)]
        repeats = {i: span for i, (_, span) in enumerate(needles)}
        in_order = [pairs[i] for i in sorted(range(len(pairs)), key=depths.__getitem__)]
        answers = [val for k in asked for key, val in in_order if key == k]  # as they appear
        if v == "multivalue":
            ask = f" What are the pass keys of {asked[0]}?"
        elif v == "multiquery":
            ask = f" What are the pass keys of {', '.join(asked[:-1])} and {asked[-1]}?"
        else:
            ask = f" What is the pass key of {asked[0]}?"
        return pieces, self.lay.enc(ask + " Answer: "), answers, repeats

    def sample(self, seed: int, depth: float | None = None) -> Sample:
        rng = random.Random(seed)
        depth = rng.random() if depth is None else depth
        pieces, question, answers, repeats = self._parts(rng, depth)
        prompt, repeats = _placed(self.hay.take(self._room(pieces, question), rng), pieces,
                                  repeats)
        return self._sample(prompt + question, " ".join(answers), answers,
                            repeats + [False] * len(question), depth=depth)


class VariableTracking(_Answered):
    """`chains` chains of `hops` + 1 variables in a haystack: " VAR ABC = 12345." then
    " VAR DEF = VAR ABC." and so on, each chain in order at drawn depths; the question asks
    which variables hold the first chain's value, the answer names all of that chain.

    `needle=True` (training only) supervises the name each link refers to ("VAR DEF = VAR
    ABC"): which variable the chain last bound, the step the answer takes at every link."""

    name = "vt"

    def __init__(self, tokenizer, L: int, G: int, hops: int = 4, chains: int = 1,
                 haystack: str = "filler", split: str = "val", option: str = "--seq-len",
                 needle: bool = False):
        self.needle, self.split = needle, split
        self.hops = _bounded("--hops", hops, 1, MAX_HOPS)
        self.chains = _bounded("--chains", chains, 1, MAX_CHAINS)
        self.lay, self.L = Layout(tokenizer, G), L
        self.hay = Haystack(self.lay, haystack, split)
        self.budget = len(self.lay.right([0] * (4 * (hops + 1) - 1)))
        self.option = option
        need = max(self._need(*self._parts(random.Random(s))[:2]) for s in range(4))
        self._check_fits(need, f"a vt prompt with --hops {hops} and --chains {chains}", option)

    def facts(self) -> dict:
        return {"hops": self.hops, "chains": self.chains, "haystack": self.hay.spec}

    def evaluated(self) -> VariableTracking:
        """The task as evaluation lays it out: the answer alone supervised."""
        if not self.needle:
            return self
        return VariableTracking(self.lay.tok, self.L, self.lay.G, self.hops, self.chains,
                                self.hay.spec, self.split, self.option)

    def _parts(self, rng: random.Random):
        names = _words(rng, self.chains * (self.hops + 1), "CCC")
        repeats: dict[int, range] = {}  # statement: its supervised tokens
        values = _numbers(rng, self.chains, VT_DIGITS)
        statements = []
        for c in range(self.chains):
            chain = names[c * (self.hops + 1) : (c + 1) * (self.hops + 1)]
            depths = sorted(rng.random() for _ in chain)
            statements.append((depths[0], self.lay.enc(f" VAR {chain[0]} = {values[c]}.")))
            for d, (a, b) in zip(depths[1:], pairwise(chain), strict=True):
                head, name = self.lay.enc(f" VAR {b} = VAR "), self.lay.enc(a)
                statements.append((d, head + name + self.lay.enc(".")))
                if self.needle:
                    repeats[len(statements) - 1] = range(len(head), len(head) + len(name))
        question = self.lay.enc(f" Question: which variables hold the value {values[0]}? "
                                "Answer: ")
        return statements, question, names[: self.hops + 1], repeats

    def sample(self, seed: int) -> Sample:
        rng = random.Random(seed)
        statements, question, answers, repeats = self._parts(rng)
        prompt, repeats = _placed(self.hay.take(self._room(statements, question), rng),
                                  statements, repeats)
        return self._sample(prompt + question, " ".join(answers), answers,
                            repeats + [False] * len(question))


class _WordList(_Answered):
    """A list of pseudo-words as long as the prompt allows, then a question; the answer names
    `words` of them."""

    ask: str
    items_per_word: int  # the shortest list holds this many items per word asked

    def __init__(self, tokenizer, L: int, G: int, words: int = 3, option: str = "--seq-len"):
        self.words = _bounded("--words", words, 1, MAX_WORDS)
        self.lay, self.L, self.option = Layout(tokenizer, G), L, option
        self.question = self.lay.enc(self.ask.format(words) + " Answer: ")
        self.budget = len(self.lay.right([0] * (4 * words - 1)))
        self.room = L - len(self.question) - self.budget
        self.item = max(len(self.lay.enc(f" {w}")) for w in ("bab", "zuz", "kim"))
        need = self.items_per_word * words * self.item + len(self.question) + self.budget
        self._check_fits(need, f"a {self.name} prompt with --words {words}", option)

    def facts(self) -> dict:
        return {"words": self.words}

    def _listed(self, items: list[str], spare: set[str],
                 rng: random.Random) -> tuple[list[int], list[str]]:
        """(tokens, items): the items in a shuffled order as tokens, left-padded to the room;
        items of words in `spare` are dropped from the end while the list is too long for it."""
        costs = {w: self.lay.enc(f" {w}") for w in set(items)}
        total = sum(len(costs[w]) for w in items)
        for i in range(len(items) - 1, -1, -1):
            if total <= self.room:
                break
            if items[i] in spare:
                total -= len(costs[items[i]])
                items[i] = ""
        items = [w for w in items if w]
        rng.shuffle(items)
        ids = [t for w in items for t in costs[w]]
        if len(ids) > self.room:
            raise UsageError(f"{self.option} {self.L} is too short for this {self.name} prompt")
        return [self.lay.pad] * (self.room - len(ids)) + ids, items


class CommonWords(_WordList):
    """Common-word extraction: `words` common words, each COMMON_TIMES as often as each of the
    many uncommon ones (which fill the rest of the list); the answer names the common ones in
    the order they first appear."""

    name = "cwe"
    ask = " What are the {} most common words in the list above?"
    items_per_word = COMMON_TIMES + 1  # its common occurrences and as many uncommon words

    def sample(self, seed: int) -> Sample:
        rng = random.Random(seed)
        n = self.room // self.item
        vocab = len(CONSONANTS) ** 2 * len(VOWELS)
        rare = 1  # times each uncommon word appears (more once the pseudo-words run out)
        while -(-(n - self.words * COMMON_TIMES * rare) // rare) + self.words > vocab:
            rare += 1
        common_n = COMMON_TIMES * rare
        distinct = -(-(n - self.words * common_n) // rare)
        drawn = _words(rng, self.words + distinct, "cvc")
        common, uncommon = drawn[: self.words], drawn[self.words :]
        items = [w for w in common for _ in range(common_n)]
        items += [w for w in uncommon for _ in range(rare)][: n - len(items)]
        listed, items = self._listed(items, set(uncommon), rng)
        common = sorted(common, key=items.index)  # named in the order they first appear
        return self._sample(listed + self.question, " ".join(common), common)


class FrequentWords(_WordList):
    """Frequent-word extraction: a list drawn word by word with a Zipf law (weight
    rank^-ZIPF_ALPHA over pseudo-words); the answer names the `words` most frequent, most
    frequent first (a draw whose top words tie is drawn again)."""

    name = "fwe"
    ask = " What are the {} most frequent words in the list above?"
    items_per_word = 6  # fewer items and the top words tie in most draws

    def sample(self, seed: int) -> Sample:
        rng = random.Random(seed)
        n = self.room // self.item
        vocab = _words(rng, min(n, len(CONSONANTS) ** 2 * len(VOWELS)), "cvc")
        weights = [(r + 1) ** -ZIPF_ALPHA for r in range(len(vocab))]
        while True:
            items = rng.choices(vocab, weights, k=n)
            top = Counter(items).most_common(self.words + 1)
            counts = [c for _, c in top] + [0]
            if len(set(counts[: self.words + 1])) == self.words + 1:  # no tie at the top
                break
        answers = [w for w, _ in top[: self.words]]
        listed, _ = self._listed(items, set(vocab) - set(answers), rng)
        return self._sample(listed + self.question, " ".join(answers), answers)


SUITE = {"niah": Needles, "vt": VariableTracking, "cwe": CommonWords, "fwe": FrequentWords}


def suite_task(task: str, tokenizer, L: int, G: int, options: RulerOptions,
               digits: int | None = None, split: str = "val", option: str = "--seq-len",
               needle: bool = False):
    """The generator of `task` (niah, vt, cwe or fwe) at length L with `options`; `needle`:
    niah's and vt's supervised repeats (training)."""
    o = options
    if task == "niah":
        return Needles(tokenizer, L, G, o.variant, o.needles, o.distractors, digits, o.haystack,
                       split, option, needle)
    if task == "vt":
        return VariableTracking(tokenizer, L, G, o.hops, o.chains, o.haystack, split, option,
                                needle)
    return SUITE[task](tokenizer, L, G, o.words, option)


def found(answer: str, expected: tuple[str, ...]) -> float:
    """RULER's score of one answer: the fraction of the expected strings it contains (case
    ignored)."""
    text = answer.lower()
    return sum(e.lower() in text for e in expected) / len(expected)
