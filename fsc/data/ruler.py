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
filler text or of a shipped corpus (fsc.corpora), between its sentences (else its words), as
RULER inserts them. The prompts read in fsc's short words (template "fsc": the question, then
"Answer: ") or in RULER's (template "ruler": its instruction before the context, its question
and answer prefix after it, its needle sentence, cwe's numbered list, fwe's noise word "..."
at rank 1; RULER's in-context examples for vt and cwe are left out). Pure Python: no torch.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left
from dataclasses import dataclass
from itertools import cycle, islice, pairwise

from fsc import corpora
from fsc.data.tasks import (
    MAX_KEY_DIGITS,
    Layout,
    Sample,
    TooShort,
    key_digits,
    tokens_needed,
)
from fsc.errors import UsageError

VARIANTS = ("single", "multikey", "multivalue", "multiquery")
HAYSTACKS = ("filler", *corpora.CORPORA)
MULTI_NEEDLES = 4  # keys (multikey, multiquery) or values (multivalue) unless --needles says
MAX_NEEDLES = 64
MAX_HOPS = 64
MAX_CHAINS = 16
MAX_WORDS = 32
VT_DIGITS = 5  # RULER's variable values
COMMON_TIMES = 6  # cwe, as RULER: a common word appears 6 times as often as an uncommon one,
LONG_CWE = 4096, 10, 3  # and from 4096 tokens on 10 times (30 against 3: each uncommon thrice)
ZIPF_ALPHA, ZETA = 2.0, math.pi**2 / 6  # fwe: rank k appears N k^-alpha / zeta(alpha) times
CONSONANTS, VOWELS = "bcdfghjklmnprstvz", "aeiou"
CAPITALS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TEMPLATES = ("fsc", "ruler")  # the prompts' wording: fsc's short one, or RULER's
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                "ten")
NOISE = "..."  # fwe under RULER's template: the word of rank 1, never asked
# RULER's templates and answer prefixes (scripts/data/synthetic/constants.py), the context
# between; {v} is niah's kind of value, {n} the words asked
RULER_NIAH = ("Some special magic {v} are hidden within the following text. Make sure to "
              "memorize it. I will quiz you about the {v} afterwards.\n{context}\nWhat are all "
              "the special magic {v} for {query} mentioned in the provided text? The special "
              "magic {v} for {query} mentioned in the provided text are")
RULER_NEEDLE = " One of the special magic numbers for {key} is: {value}"
RULER_VT = ("Memorize and track the chain(s) of variable assignment hidden in the following "
            "text.\n\n{context}\nQuestion: Find all variables that are assigned the value "
            "{query} in the text above. Answer: According to the chain(s) of variable "
            "assignment in the text above, {n} variables are assigned the value {query}, they "
            "are: ")
RULER_CWE = ("Below is a numbered list of words. In these words, some appear more often than "
             "others. Memorize the ones that appear most often.\n{context}\nQuestion: What are "
             "the {n} most common words in the above list? Answer: The top {n} words that "
             "appear most often in the list are:")
RULER_FWE = ("Read the following coded text and track the frequency of each coded word. Find "
             "the {n} most frequently appeared coded words. {context}\nQuestion: Do not "
             "provide any explanation. Please ignore the dots '....'. What are the {n} most "
             "frequently appeared words in the above coded text? Answer: According to the "
             "coded text above, the {n} most frequently appeared words are:")


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
    template: str = "fsc"  # every task: the prompts' wording, fsc's or RULER's (TEMPLATES)


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


def _template(template: str) -> bool:
    """Whether `template` (one of TEMPLATES) is RULER's."""
    if template not in TEMPLATES:
        raise UsageError(f"--template {template!r} is not one of {', '.join(TEMPLATES)}")
    return template == "ruler"


def _split(template: str, **fields) -> tuple[str, str]:
    """(the text before the context, the text after it) of a RULER template."""
    head, tail = template.split("{context}")
    return head.format(**fields), tail.format(**fields)


def _numbers(rng: random.Random, n: int, digits: int) -> list[str]:
    """n distinct numbers of `digits` digits (leading zeros kept)."""
    return [f"{v:0{digits}d}" for v in rng.sample(range(10**digits), n)]


SNAP = 1 / 40  # a piece moves at most this share of its haystack (RULER's depth step) to sit
# between sentences
ENDS = (".", "!", "?", ".'", '."', "!'", '!"', "?'", '?"')  # a token that ends a sentence


def _bounds(texts: list[str]) -> tuple[list[int], list[int]]:
    """(sentence boundaries, word boundaries) among positions 1..len(texts) - 1 of tokens with
    these texts: before a token that begins with whitespace after one that does not end with it
    (a word boundary), and of those the ones after a token that ends a sentence or before a line
    break (a sentence boundary). It holds for a byte-level tokenizer (the space is a token) as
    for one whose tokens carry a leading space."""
    sentences, words = [], []
    for i in range(1, len(texts)):
        before, here = texts[i - 1], texts[i]
        if here[:1].isspace() and before and not before[-1].isspace():
            words.append(i)
            if before.endswith(ENDS) or here[0] == "\n":
                sentences.append(i)
    return sentences, words


def _nearest(bounds: list[int], target: float, low: int) -> int | None:
    """The boundary of sorted `bounds` at or after `low` nearest `target` (None: there is none)."""
    i = bisect_left(bounds, target)
    near = [b for b in bounds[max(i - 1, 0) : i + 1] if b >= low]
    if not near:
        i = bisect_left(bounds, low)
        near = bounds[i : i + 1]
    return min(near, key=lambda b: abs(b - target)) if near else None


@dataclass(frozen=True)
class Hay:
    """A haystack's tokens and where a piece may go between them (positions 0..len(ids),
    sorted): between sentences, and between words."""

    ids: list[int]
    sentences: list[int]
    words: list[int]

    def cut(self, depth: float, low: int = 0) -> int:
        """Where a piece at `depth` goes (0: the start, 1: the end), at or after `low`: the
        sentence boundary nearest round(depth * len(ids)) when one lies within SNAP of the
        haystack's length of it, else the nearest word boundary (a word's length away at
        most, in a haystack of words), else that very token (a haystack with no boundary
        near there)."""
        target = max(low, round(depth * len(self.ids)))
        at = _nearest(self.sentences, target, low)
        if at is not None and abs(at - target) <= SNAP * len(self.ids):
            return at
        at = _nearest(self.words, target, low)
        return target if at is None else at


def _placed(hay: Hay, pieces: list[tuple[float, list[int]]],
            marked: dict[int, range] | None = None) -> tuple[list[int], list[bool]]:
    """(`hay` with each piece inserted at its depth (`Hay.cut`), in depth order (pieces at one
    depth keep their order); the positions `marked` names in a piece (piece index: a range of
    its tokens), True)."""
    out, marks, at, ids = [], [], 0, hay.ids
    for i in sorted(range(len(pieces)), key=lambda i: pieces[i][0]):
        depth, piece = pieces[i]
        cut = hay.cut(depth, at)
        out += ids[at:cut]
        span = (marked or {}).get(i, range(0))
        marks += [False] * (cut - at) + [j in span for j in range(len(piece))]
        out += piece
        at = cut
    return out + ids[at:], marks + [False] * (len(ids) - at)


_CORPUS_TOKENS: dict[tuple, tuple] = {}


class Haystack:
    """What needles sit in: the filler text, or a shipped corpus's `split` (eval reads the
    validation text, training the training text), a window of it from a drawn sentence on."""

    def __init__(self, layout: Layout, spec: str = "filler", split: str = "val"):
        self.lay, self.spec, self.texts = layout, spec, {}
        if spec == "filler":
            self.tokens, self.starts = layout.unit, self._starts(layout.unit)
            return
        if spec not in HAYSTACKS:  # a corpus by its name: the command picks the split
            raise UsageError(f"--haystack {spec!r} is not one of {', '.join(HAYSTACKS)}"
                             + (" (fsc eval reads its validation text, fsc train its training "
                                "text)" if corpora.is_corpus(spec) else ""))
        key = (id(layout.tok), spec, split)
        held = _CORPUS_TOKENS.get(key)
        if held is None or held[0] is not layout.tok:  # encoded once per tokenizer
            tokens = layout.enc(corpora.read(spec, split))
            held = _CORPUS_TOKENS[key] = (layout.tok, tokens, self._starts(tokens))
        self.tokens, self.starts = held[1], held[2]

    def _text(self, ids: list[int]) -> list[str]:
        """Each token's text as it reads after a word (a leading space kept)."""
        texts, dec, ref = self.texts, self.lay.tok.decode, self.lay.enc("a")
        for t in set(ids) - texts.keys():
            head, both = dec(ref), dec([*ref, t])
            texts[t] = both[len(head):] if both.startswith(head) else dec([t])
        return [texts[t] for t in ids]

    def _starts(self, tokens: list[int]) -> list[int]:
        """Where a sentence of `tokens` starts (read as a cycle), else where a word does."""
        sentences, words = _bounds(self._text(tokens[-1:] + tokens))
        return [b - 1 for b in sentences or words] or [0]

    def take(self, n: int, rng: random.Random) -> Hay:
        """n tokens: the text (repeated as often as it takes) from a drawn sentence's start to
        the sentence end nearest n tokens on (within SNAP of n, else the word end nearest it),
        padded on the left to n."""
        start = rng.choice(self.starts)
        window = list(islice(cycle(self.tokens), start, start + n + 1))
        sentences, words = _bounds(self._text(window))  # the (n+1)-th token: is n one?
        end = max([b for b in sentences if b >= n - SNAP * n] or words or [n])
        pad = n - end
        ids = [self.lay.pad] * pad + window[:end]
        return Hay(ids, [pad, *(b + pad for b in sentences if b < end), n],
                   [pad, *(b + pad for b in words if b < end), n])


class _Answered:
    """A task whose prompt ends with a question and whose answer is text padded to a fixed
    number of blocks (`budget` tokens: an answer's UTF-8 bytes, rounded up to whole blocks;
    a byte-level tokenizer never needs more tokens than bytes)."""

    name: str
    lay: Layout
    L: int
    budget: int
    option: str
    ruler: bool = False  # RULER's template
    head: list[int]  # the prompt's tokens before the context (RULER's instruction)

    def _budget(self, longest: list[str]) -> int:
        """Whole blocks for the answer naming `longest` (bytes: what no answer exceeds)."""
        return len(self.lay.right([0] * len(self._say(longest).encode())))

    def _say(self, answers: list[str]) -> str:
        """The answer's text: the strings one space apart (after RULER's answer prefix, which
        ends on a word, one space first)."""
        return " " * self.ruler + " ".join(answers)

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
        return len(self.head) + sum(len(p) for _, p in pieces) + len(question) + self.budget

    def _room(self, pieces, question) -> int:
        """The haystack's tokens in a sample of these pieces."""
        room = self.L - self._need(pieces, question)
        if room < 0:  # a tokenizer that spends more tokens on this draw than on the checked ones
            raise UsageError(f"{self.option} {self.L} is too short for this {self.name} prompt")
        return room

    def _check_fits(self, need: int, what: str, option: str) -> None:
        if self.L < need:
            raise TooShort(f"{option} {self.L} is shorter than {what} "
                           f"({tokens_needed(need, self.lay.G)})", need)


class Needles(_Answered):
    """Pass keys of named keys in a haystack (" The pass key of baku is 4821."),
    then a question about some of them. single: one key asked; multikey: `needles` keys, one
    asked; multivalue: one key with `needles` values, all asked; multiquery: `needles` keys,
    all asked. `distractors` more needles of keys never asked come with any variant. The
    (first) asked needle sits at the sample's depth, the others at drawn depths.

    `needle=True` (training only) has each needle repeat its value (" The pass key of baku is
    4821, 4821."), the repeat supervised: a copy from a few tokens back that teaches
    the copy the answer needs, as passkey's needle does (fsc.data.tasks.Passkey).

    Under RULER's template a needle reads " One of the special magic numbers for baku is:
    4821.", the answer names the values a comma apart."""

    name = "niah"

    def __init__(self, tokenizer, L: int, G: int, variant: str = "multikey",
                 needles: int | None = None, distractors: int = 0, digits: int | None = None,
                 haystack: str = "filler", split: str = "val", option: str = "--seq-len",
                 needle: bool = False, template: str = "fsc"):
        self.ruler = _template(template)
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
        self.budget = self._budget(["0" * self.digits] * asked)
        self.head = self.lay.enc(self._ruler("")[0]) if self.ruler else []
        self.option = option
        need = max(self._need(*self._parts(random.Random(s), 0.5)[:2]) for s in range(4))
        what = (f"a niah {variant} prompt with {needles} needle{'s' * (needles > 1)} and "
                f"{distractors} distractor{'s' * (distractors != 1)}")
        self._check_fits(need, what, option)

    def facts(self) -> dict:
        return {"variant": self.variant, "needles": self.needles,
                "distractors": self.distractors, "haystack": self.hay.spec,
                "template": TEMPLATES[self.ruler]}

    def evaluated(self) -> Needles:
        """The task as evaluation lays it out: the answer alone supervised, a corpus haystack
        read from its held-out split (the in-loop eval of a run trained on its train split)."""
        if not self.needle and self.split == "val":
            return self
        return Needles(self.lay.tok, self.L, self.lay.G, self.variant, self.needles,
                       self.distractors, self.digits, self.hay.spec, "val", self.option,
                       template=TEMPLATES[self.ruler])

    def _ruler(self, query: str) -> tuple[str, str]:
        """RULER's niah template around the context, asking `query`: in the singular where
        one value is asked, as RULER words it."""
        text, kind = RULER_NIAH, "numbers"
        if self.variant in ("single", "multikey") or self.needles == 1:
            text = text.replace("Some", "A").replace("are all", "is").replace("are", "is")
            kind = "number"
        return _split(text, v=kind, query=query)

    def _say(self, answers: list[str]) -> str:
        return " " + ", ".join(answers) if self.ruler else " ".join(answers)

    def _needle(self, key: str, value: str) -> tuple[list[int], range]:
        """(a needle's tokens, where its supervised repeat of the value lies)."""
        said = RULER_NEEDLE if self.ruler else " The pass key of {key} is {value}"
        head = self.lay.enc(said.format(key=key, value=value))
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
        if self.ruler:
            query = (f"{', '.join(asked[:-1])}, and {asked[-1]}" if len(asked) > 1
                     else asked[0])
            return pieces, self.lay.enc(self._ruler(query)[1]), answers, repeats
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
        head = [False] * len(self.head)
        return self._sample(self.head + prompt + question, self._say(answers), answers,
                            head + repeats + [False] * len(question), depth=depth)


class VariableTracking(_Answered):
    """`chains` chains of `hops` + 1 variables in a haystack: " VAR ABC = 12345." then
    " VAR DEF = VAR ABC." and so on, each chain in order at drawn depths; the question asks
    which variables hold the first chain's value, the answer names all of that chain.

    `needle=True` (training only) supervises the name each link refers to ("VAR DEF = VAR
    ABC"): which variable the chain last bound, the step the answer takes at every link."""

    name = "vt"

    def __init__(self, tokenizer, L: int, G: int, hops: int = 4, chains: int = 1,
                 haystack: str = "filler", split: str = "val", option: str = "--seq-len",
                 needle: bool = False, template: str = "fsc"):
        self.needle, self.split, self.ruler = needle, split, _template(template)
        self.hops = _bounded("--hops", hops, 1, MAX_HOPS)
        self.chains = _bounded("--chains", chains, 1, MAX_CHAINS)
        self.lay, self.L = Layout(tokenizer, G), L
        self.hay = Haystack(self.lay, haystack, split)
        self.budget = self._budget(["ABC"] * (self.hops + 1))
        self.head = self.lay.enc(self._ruler("")[0]) if self.ruler else []
        self.option = option
        need = max(self._need(*self._parts(random.Random(s))[:2]) for s in range(4))
        self._check_fits(need, f"a vt prompt with --hops {hops} and --chains {chains}", option)

    def facts(self) -> dict:
        return {"hops": self.hops, "chains": self.chains, "haystack": self.hay.spec,
                "template": TEMPLATES[self.ruler]}

    def evaluated(self) -> VariableTracking:
        """The task as evaluation lays it out: the answer alone supervised, a corpus haystack
        read from its held-out split (the in-loop eval of a run trained on its train split)."""
        if not self.needle and self.split == "val":
            return self
        return VariableTracking(self.lay.tok, self.L, self.lay.G, self.hops, self.chains,
                                self.hay.spec, "val", self.option,
                                template=TEMPLATES[self.ruler])

    def _ruler(self, value: str) -> tuple[str, str]:
        return _split(RULER_VT, query=value, n=self.hops + 1)

    def _say(self, answers: list[str]) -> str:
        return " ".join(answers)  # RULER's answer prefix ends with a space

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
        question = self.lay.enc(self._ruler(values[0])[1] if self.ruler else
                                f" Question: which variables hold the value {values[0]}? "
                                "Answer: ")
        return statements, question, names[: self.hops + 1], repeats

    def sample(self, seed: int) -> Sample:
        rng = random.Random(seed)
        statements, question, answers, repeats = self._parts(rng)
        prompt, repeats = _placed(self.hay.take(self._room(statements, question), rng),
                                  statements, repeats)
        return self._sample(self.head + prompt + question, self._say(answers), answers,
                            [False] * len(self.head) + repeats + [False] * len(question))


class _WordList(_Answered):
    """A list of pseudo-words as long as the prompt allows, then a question; the answer names
    `words` of them."""

    ask: str
    ruler_template: str  # RULER's template and answer prefix, {n} the words asked
    items_per_word: int  # the shortest list holds this many items per word asked
    numbered = False  # RULER's list numbers its items ("1. bab 2. zuz")
    noise: tuple[str, ...] = ()  # items besides the pseudo-words

    def __init__(self, tokenizer, L: int, G: int, words: int = 3, option: str = "--seq-len",
                 template: str = "fsc"):
        self.words = _bounded("--words", words, 1, MAX_WORDS)
        self.ruler = _template(template)
        self.lay, self.L, self.option = Layout(tokenizer, G), L, option
        if self.ruler:
            head, tail = _split(self.ruler_template, n=self._count(words))
            self.head, self.question = self.lay.enc(head), self.lay.enc(tail)
        else:
            self.head, self.question = [], self.lay.enc(self.ask.format(words) + " Answer: ")
        self.budget = self._budget(["bab"] * words)
        self.room = L - len(self.head) - len(self.question) - self.budget
        self.item = max(len(self.lay.enc(f" {w}")) for w in ("bab", "zuz", "kim", *self.noise))
        self.labels: list[list[int]] = []  # the numbered list's labels, as far as needed
        self.sums = [0]  # the tokens of the first m labels
        self.fit = self._fit()
        need = (self._spent(self.items_per_word * words) + len(self.head) + len(self.question)
                + self.budget)
        self._check_fits(need, f"a {self.name} prompt with --words {words}", option)

    def _count(self, words: int) -> str:
        return str(words)

    def _label(self, i: int) -> list[int]:
        """The tokens numbering item i of a numbered list ("1." then " 2.", " 3.", ...)."""
        while len(self.labels) <= i:
            n = len(self.labels)
            self.labels.append(self.lay.enc(f"{' ' * (n > 0)}{n + 1}."))
            self.sums.append(self.sums[-1] + len(self.labels[-1]))
        return self.labels[i]

    def _numbering(self, m: int) -> int:
        """Tokens of the labels of a list of m items (none unless the list is numbered)."""
        if not self.numbered or m == 0:
            return 0
        self._label(m - 1)
        return self.sums[m]

    def _spent(self, m: int) -> int:
        """Tokens of a list of m items at most (each as long as the longest item)."""
        return m * self.item + self._numbering(m)

    def _fit(self) -> int:
        """How many items the room holds at least."""
        m = max(self.room, 0) // self.item
        while m and self._spent(m) > self.room:  # numbered: fewer
            m -= 1
        return m

    def facts(self) -> dict:
        return {"words": self.words, "template": TEMPLATES[self.ruler]}

    def _listed(self, items: list[str], spare: set[str],
                 rng: random.Random) -> tuple[list[int], list[str]]:
        """(tokens, items): the items in a shuffled order as tokens, left-padded to the room;
        items of words in `spare` are dropped from the end while the list is too long for it."""
        costs = {w: self.lay.enc(f" {w}") for w in set(items)}
        total, kept = sum(len(costs[w]) for w in items), len(items)
        for i in range(len(items) - 1, -1, -1):
            if total + self._numbering(kept) <= self.room:
                break
            if items[i] in spare:
                total -= len(costs[items[i]])
                items[i], kept = "", kept - 1
        items = [w for w in items if w]
        rng.shuffle(items)
        ids = [t for i, w in enumerate(items)
               for t in (*(self._label(i) if self.numbered else ()), *costs[w])]
        if len(ids) > self.room:
            raise UsageError(f"{self.option} {self.L} is too short for this {self.name} prompt")
        return self.head + [self.lay.pad] * (self.room - len(ids)) + ids, items


class CommonWords(_WordList):
    """Common-word extraction: `words` common words, each `times` as often as each of the many
    uncommon ones (which fill the rest of the list), as RULER lays it out: 6 times (each
    uncommon word once) below LONG_CWE tokens, 10 times (each uncommon word 3 times) from there
    on; the answer names the common ones in the order they first appear (under RULER's
    template, numbered as its list is: " 1. bab 2. zuz")."""

    name = "cwe"
    ask = " What are the {} most common words in the list above?"
    ruler_template = RULER_CWE

    def __init__(self, tokenizer, L: int, G: int, words: int = 3, option: str = "--seq-len",
                 template: str = "fsc"):
        long, times, rare = LONG_CWE
        self.times, self.rare = (times, rare) if L >= long else (COMMON_TIMES, 1)
        self.items_per_word = (self.times + 1) * self.rare  # its items and as many uncommon
        self.numbered = template == "ruler"
        super().__init__(tokenizer, L, G, words, option, template)

    def _say(self, answers: list[str]) -> str:
        if not self.ruler:
            return " ".join(answers)
        return " " + " ".join(f"{i + 1}. {w}" for i, w in enumerate(answers))

    def sample(self, seed: int) -> Sample:
        rng = random.Random(seed)
        n = self.fit
        vocab = len(CONSONANTS) ** 2 * len(VOWELS)
        rare = self.rare  # times each uncommon word appears (more once the pseudo-words run out)
        while -(-(n - self.words * self.times * rare) // rare) + self.words > vocab:
            rare += 1
        common_n = self.times * rare
        distinct = -(-(n - self.words * common_n) // rare)
        drawn = _words(rng, self.words + distinct, "cvc")
        common, uncommon = drawn[: self.words], drawn[self.words :]
        items = [w for w in common for _ in range(common_n)]
        items += [w for w in uncommon for _ in range(rare)][: n - len(items)]
        listed, items = self._listed(items, set(uncommon), rng)
        common = sorted(common, key=items.index)  # named in the order they first appear
        return self._sample(listed + self.question, self._say(common), common)


class FrequentWords(_WordList):
    """Frequent-word extraction as RULER counts it: the pseudo-word of rank k appears
    floor(N k^-ZIPF_ALPHA / zeta(ZIPF_ALPHA)) times (N as large as the list's room allows), in
    a shuffled order; the answer names the `words` most frequent, most frequent first. A length
    at which the counts of the top `words` + 1 ranks tie is refused. Under RULER's template
    rank 1 is the noise word "...", never asked: the answer names ranks 2 on."""

    name = "fwe"
    ask = " What are the {} most frequent words in the list above?"
    ruler_template = RULER_FWE
    items_per_word = 6  # the shortest list: fewer items leave too few words to rank

    def __init__(self, tokenizer, L: int, G: int, words: int = 3, option: str = "--seq-len",
                 template: str = "fsc"):
        self.noise = (NOISE,) if template == "ruler" else ()
        super().__init__(tokenizer, L, G, words, option, template)
        n, top = self.fit, len(CONSONANTS) ** 2 * len(VOWELS)
        low, high = n, 2 * n  # the largest N whose counts hold at most n items
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if sum(_zipf(mid, top)) <= n else (low, mid - 1)
        self.counts = _zipf(low, top)
        if not self._ranked(words):
            most = next((w for w in range(words - 1, 0, -1) if self._ranked(w)), 1)
            raise UsageError(f"{option} {L} is too short for a fwe prompt with --words {words}: "
                             f"its {words} most frequent words would tie (at most --words "
                             f"{most} at this length)")

    def _count(self, words: int) -> str:
        return NUMBER_WORDS[words] if words < len(NUMBER_WORDS) else str(words)

    def _ranked(self, words: int) -> bool:
        """Whether the top `words` ranks asked each appear more often than the next rank."""
        first = len(self.noise)
        counts = [*self.counts[first : first + words + 1], *[0] * (words + 1)][: words + 1]
        return all(a > b for a, b in pairwise(counts))

    def sample(self, seed: int) -> Sample:
        rng = random.Random(seed)
        vocab = _words(rng, len(self.counts), "cvc")
        vocab[: len(self.noise)] = self.noise
        items = [w for w, c in zip(vocab, self.counts, strict=True) for _ in range(c)]
        answers = vocab[len(self.noise) : len(self.noise) + self.words]
        listed, _ = self._listed(items, set(vocab) - set(answers), rng)
        return self._sample(listed + self.question, self._say(answers), answers)


def _zipf(n: int, top: int) -> list[int]:
    """How often ranks 1, 2, ... appear in a list of about n items (RULER's counts), while
    they appear at all (`top` ranks at most)."""
    counts = [int(n * (k + 1) ** -ZIPF_ALPHA / ZETA) for k in range(top)]
    return counts[: next((k for k, c in enumerate(counts) if c == 0), top)]


SUITE = {"niah": Needles, "vt": VariableTracking, "cwe": CommonWords, "fwe": FrequentWords}


def suite_task(task: str, tokenizer, L: int, G: int, options: RulerOptions,
               digits: int | None = None, split: str = "val", option: str = "--seq-len",
               needle: bool = False):
    """The generator of `task` (niah, vt, cwe or fwe) at length L with `options`; `needle`:
    niah's and vt's supervised repeats (training)."""
    o = options
    if task == "niah":
        return Needles(tokenizer, L, G, o.variant, o.needles, o.distractors, digits, o.haystack,
                       split, option, needle, o.template)
    if task == "vt":
        return VariableTracking(tokenizer, L, G, o.hops, o.chains, o.haystack, split, option,
                                needle, o.template)
    return SUITE[task](tokenizer, L, G, o.words, option, o.template)


def found(answer: str, expected: tuple[str, ...]) -> float:
    """RULER's score of one answer: the fraction of the expected strings it contains (case
    ignored)."""
    text = answer.lower()
    return sum(e.lower() in text for e in expected) / len(expected)
