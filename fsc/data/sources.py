"""What `--data` names, as a source of samples: a synthetic task (fsc.data.tasks, or one of
the RULER-style suite, fsc.data.ruler), a weighted mix of them (fsc.data.mix), a shipped corpus
(fsc.corpora: `shakespeare`, `shakespeare:train`, `shakespeare:val`), a local text file, or a
Hugging Face dataset streamed through the optional `datasets` library.

`open_data(...)` checks the source up front (a missing or corrupt file is one line, exit 2)
and returns an object whose `sample(index)` is the index-th training sample: the same for a
given seed however the run was split by resumes. Text is tokenised once, documents joined by
EOS, cut into sequences of L and visited in a seeded order, a fresh order each epoch; for
training (`shift`) each epoch after the first cuts at a fresh seeded offset too.
"""

from __future__ import annotations

import hashlib
import importlib
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fsc import corpora
from fsc.data import ruler
from fsc.data.files import FIELD_SUFFIXES, TEXT_SUFFIXES, documents, not_a_file, row_text
from fsc.data.mix import RULER, LengthMix, MixData, parse_mix
from fsc.data.tasks import TASKS, Sample
from fsc.errors import UsageError
from fsc.hub.reach import looks_local, quiet, unreachable
from fsc.seeds import derive

BOS = False  # no training sequence begins with BOS; every checkpoint records it (config.json
# `bos`) and `fsc decode` follows the record, so its prompts begin as training's did
SUITE = {"niah_multikey": "multikey", "niah_multivalue": "multivalue",
         "niah_multiquery": "multiquery", "vt": None, "cwe": None, "fwe": None}  # name: variant
SYNTHETIC = (*TASKS, *SUITE)
NIAH = tuple(n for n in SUITE if n.startswith("niah"))
KNOBS = {"needles": NIAH, "distractors": NIAH, "hops": ("vt",), "chains": ("vt",),
         "words": ("cwe", "fwe"), "haystack": (*NIAH, "vt"),
         "template": (*NIAH, "vt", "cwe", "fwe")}  # a suite knob: the tasks using it
# the other task options of `fsc train`: the tasks reading each (given for data none of whose
# tasks reads it, it is refused, as a suite knob is)
TASK_OPTIONS = {"needle_digits": ("passkey", *NIAH), "supervise_needle": ("passkey", *NIAH, "vt"),
                "pairs": ("mqar",)}


@dataclass(frozen=True)
class DataOptions:
    needle_digits: int | None = None  # None: the default for G (tasks.key_digits)
    pairs: int = 8
    text_field: str = "text"
    supervise_needle: bool = False
    suite: dict = field(default_factory=dict)  # the RULER-style tasks' knobs given (KNOBS)


class TaskData:
    def __init__(self, task, seed: int):
        self.task, self.seed = task, seed
        self.name = task.name
        self.supervises = "answer"

    def sample(self, index: int) -> Sample:
        return self.task.sample(derive(self.seed, index, 1))


class TextData:
    """A token stream cut into n = len // L sequences, visited in a seeded order, a fresh one
    each epoch. With `shift` (training), epoch e > 0 cuts the stream at a seeded offset in
    [0, L), read as a ring (the last tokens run on into the first): a position is not always
    a sequence's first, and the tokens short of a whole sequence are not left out every epoch.
    Epoch 0 cuts at 0, as evaluation always does (its sequences are the distinct ones)."""

    def __init__(self, name: str, tokens: np.ndarray, L: int, seed: int,
                 option: str = "--seq-len", shift: bool = False):
        self.name, self.tokens, self.L, self.seed, self.shift = name, tokens, L, seed, shift
        self.n = len(tokens) // L
        self.supervises = "all"
        self._order: tuple[int, list[int], int] | None = None  # epoch, order, offset
        if self.n < 1:
            raise UsageError(f"--data {name}: {len(tokens)} tokens, fewer than one sequence of "
                             f"{option} {L}")

    def sample(self, index: int) -> Sample:
        epoch, i = divmod(index, self.n)
        if self._order is None or self._order[0] != epoch:
            order = list(range(self.n))
            random.Random(derive(self.seed, epoch, 2)).shuffle(order)
            offset = random.Random(derive(self.seed, epoch, 3)).randrange(self.L) \
                if self.shift and epoch else 0
            self._order = (epoch, order, offset)
        _, order, offset = self._order
        start = order[i] * self.L + offset  # < n L <= len(tokens)
        ids = self.tokens[start : start + self.L].tolist()
        ids += self.tokens[: self.L - len(ids)].tolist()  # past the end: on from the first
        return Sample(ids, [True] * self.L, [True] * self.L)


class HubData:
    """`hf:NAME[:CONFIG][:SPLIT]`, streamed in order and packed; samples are read in order
    (a resumed run skips the ones already used). Without SPLIT, training reads `train` and
    evaluation (`split` "val") the first of HELD_OUT the dataset has: never the rows training
    read, unless named. A row whose field is missing, null or not a string is one line naming
    the row (the first row is read when the source opens); rows that hold no text at all (every
    one empty) are refused, not read as a run of EOS."""

    def __init__(self, spec: str, tokenizer, L: int, field: str, split: str = "train"):
        name, config, asked = hub_parts(spec)
        try:  # an optional extra: imported only when asked for
            datasets = importlib.import_module("datasets")
        except ImportError:
            raise UsageError(f"--data {spec}: needs the datasets library "
                             "(pip install 'fsc[data]')") from None
        offline = None if looks_local(name) else unreachable(datasets=True)  # (the cache alone)
        try:
            with quiet():  # the client's retries are not shown
                streams = datasets.load_dataset(name, config, split=asked, streaming=True)
                self.split = asked or _split(spec, list(streams), split)
                self.stream = streams if asked else streams[self.split]
                first = next(iter(self.stream), None)
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - datasets raises many kinds
            if offline is not None:
                raise UsageError(f"--data {spec}: not a local folder, and not in the Hugging Face "
                                 f"cache; the Hub is out of reach ({offline})") from None
            raise UsageError(f"--data {spec}: cannot open ({str(e) or type(e).__name__})") from None
        self.name, self.tok, self.L, self.field = spec, tokenizer, L, field
        if first is None:
            raise UsageError(f"--data {spec}: holds no rows")
        self._text(first, 1)
        self.supervises = "all"
        self._rows = enumerate(self.stream, start=1)
        self._buffer: list[int] = []
        self._next = 0
        self._read_text = False  # whether a row has held text yet
        self.length = lambda index: L  # sample index's length (open_lengths: drawn per batch)

    def _text(self, row, n: int) -> str:
        """The text of row number `n`; UsageError unless its field holds a string."""
        return row_text(row, self.field, f"{self.name}: row {n}")

    def sample(self, index: int) -> Sample:
        while self._next <= index:
            L = self.length(self._next)
            while len(self._buffer) < L:
                try:
                    n, row = next(self._rows)
                except StopIteration:
                    if not self._read_text:  # a whole pass without text: it would never end,
                        # or (with EOS) fill the sequences with EOS alone
                        raise UsageError(f"--data {self.name}: holds no text") from None
                    self._rows = enumerate(self.stream, start=1)  # another pass
                    continue
                text = self.tok.encode(self._text(row, n))
                self._read_text = self._read_text or bool(text)
                self._buffer += text + _eos(self.tok)
            ids, self._buffer = self._buffer[:L], self._buffer[L:]
            self._next += 1
        return Sample(ids, [True] * L, [True] * L)


def hub_parts(spec: str) -> tuple[str, str | None, str | None]:
    """(name, config, split) of `hf:NAME[:CONFIG][:SPLIT]`, None for a part left out;
    UsageError for a spec without a name or with a part too many."""
    parts = spec[3:].split(":")
    if not parts[0].strip() or len(parts) > 3:
        raise UsageError(f"--data {spec}: not hf:NAME[:CONFIG][:SPLIT] (a dataset's name or "
                         "a local folder, then its config and split, each optional)")
    name, config, split = [*parts, "", ""][:3]
    return name, config or None, split or None


HELD_OUT = ("validation", "valid", "val", "test")  # evaluation's split of hf: data, the first


def _split(spec: str, splits: list[str], split: str) -> str:
    """The split of a dataset with `splits` that `split` (train, or val: a held-out one)
    reads, SPLIT left out of `spec`; UsageError where it has none."""
    for name in ("train",) if split == "train" else HELD_OUT:
        if name in splits:
            return name
    name, config, _ = hub_parts(spec)
    base = f"hf:{name}:{config or ''}:"
    what = "no train split" if split == "train" else (
        f"no held-out split ({', '.join(HELD_OUT)}) to evaluate on")
    raise UsageError(f"--data {spec}: {what}; its splits: {', '.join(splits)}; name the one "
                     f"to read ({base}{splits[0]})")


def _eos(tokenizer) -> list[int]:
    eos = getattr(tokenizer, "eos_id", None)
    return [] if eos is None else [eos]


def data_name(spec: str | None, split: str = "val") -> str | None:
    """The name of the data `spec` names, as `open_data(spec, ..., split=split)` reads it: a
    shipped corpus with its split (`shakespeare` read for evaluation is shakespeare:val),
    anything else (a file, an hf: dataset, tasks) as it is given."""
    if spec is not None and corpora.is_corpus(spec):
        corpus, part = corpora.split_of(spec, split)
        return f"{corpus.name}:{part}"
    return spec


def open_data(spec: str, tokenizer, L: int, G: int, seed: int,
              options: DataOptions = DataOptions(),
              option: str = "--seq-len", split: str = "train",
              shift: bool = False) -> TaskData | TextData | HubData:
    """The data `spec` names, in sequences of L tokens; errors about L name `option` (the
    command-line option L came from). A shipped corpus named without a split, and a task's
    corpus haystack (--haystack shakespeare), is `split`. `shift`: text is cut at a fresh
    offset each epoch after the first (TextData; training asks for it)."""
    mix = tasks_of(spec)
    for knob in getattr(options, "suite", {}):  # a knob no task reads is a mistake, not a no-op
        _read_by(f"--{knob}", KNOBS[knob], mix, spec)
    if spec in SYNTHETIC:
        return TaskData(_task(spec, tokenizer, L, G, options, option, split), seed)
    if mix is not None:
        return MixData(spec, mix, lambda name: TaskData(
            _task(name, tokenizer, L, G, options, option, split), seed), seed)
    if spec.startswith("hf:"):
        return HubData(spec, tokenizer, L, options.text_field, split)
    if corpora.is_corpus(spec):
        corpus, part = corpora.split_of(spec, split)
        ids = tokenizer.encode(corpora.read(spec, split)) + _eos(tokenizer)
        return TextData(f"{corpus.name}:{part}", np.asarray(ids, dtype=np.int64), L, seed, option,
                        shift)
    path = Path(spec)
    if path.suffix not in TEXT_SUFFIXES:
        raise UsageError(not_a_file(spec) or _unknown(spec))
    docs = documents(path, options.text_field)
    if not any(docs):
        raise UsageError(f"--data {spec}: holds no text")
    ids: list[int] = []
    for doc in docs:
        ids += tokenizer.encode(doc) + _eos(tokenizer)
    return TextData(str(path), np.asarray(ids, dtype=np.int64), L, seed, option, shift)


def absolute(spec: str) -> str:
    """--data as a run keeps it, so that it resumes (and `fsc eval` finds it) from any
    directory: a text file by its absolute path, `hf:DIR` of a local folder as `hf:` and the
    folder's absolute path; anything else (a task, a mix, a corpus, a Hub name) as given."""
    if spec.startswith("hf:"):
        name, colon, rest = spec[3:].partition(":")
        local = Path(name).expanduser()
        return f"hf:{local.resolve()}{colon}{rest}" if name and local.is_dir() else spec
    path = Path(spec)
    return str(path.resolve()) if path.suffix in TEXT_SUFFIXES and path.is_file() else spec


def file_digest(spec: str) -> str | None:
    """"SIZE:SHA256" of the text file --data `spec` names (None for any other data, or a file
    gone)."""
    path = Path(spec)
    if path.suffix not in TEXT_SUFFIXES or not path.is_file():
        return None
    with path.open("rb") as f:
        return f"{path.stat().st_size}:{hashlib.file_digest(f, 'sha256').hexdigest()}"


def _unknown(spec: str) -> str:
    """What is wrong with `spec`, which names no data: the names of a mix that are no task, or
    every kind of data there is."""
    names = [p.strip().partition(":")[0] for p in spec.split(",")]
    strangers = [name for name in names if name not in SYNTHETIC]
    if len(names) > 1 and "" in names:
        return (f"--data {spec!r}: an empty entry in a mix (a comma too many, or a weight with "
                "nothing before its colon)")
    if len(names) > 1 and strangers:
        return (f"--data {spec!r}: {', '.join(map(repr, strangers))} in a mix, which holds the "
                f"tasks {', '.join(SYNTHETIC)} only")
    return (f"--data {spec!r} is not one of {', '.join(SYNTHETIC)}, ruler or a mix "
            f"(passkey:2,vt:1), {', '.join(corpora.CORPORA)}[:train|val], a "
            f"{'/'.join(TEXT_SUFFIXES)} file or hf:NAME[:CONFIG][:SPLIT]")


def tasks_of(spec: str) -> list[tuple[str, float]] | None:
    """The (task, weight) pairs `spec` names: one task, a mix of them, or None (text)."""
    return [(spec, 1.0)] if spec in SYNTHETIC else parse_mix(spec, SYNTHETIC)


def _read_by(flag: str, tasks: tuple[str, ...], mix, spec: str) -> None:
    """UsageError unless one of the tasks of `mix` (tasks_of(spec)) is among `tasks`, the
    ones reading option `flag`."""
    if mix is None or not {name for name, _ in mix} & set(tasks):
        ruler = ", ruler" if set(tasks) & set(RULER) else ""
        raise UsageError(f"{flag}: for --data {', '.join(tasks)}{ruler} or a mix holding one "
                         f"(this is {spec})")


def check_read(spec: str, given: list[str]) -> None:
    """UsageError for an option among `given` (needle_digits, supervise_needle, pairs,
    text_field, or a suite knob of KNOBS) that the data `spec` names does not read: a knob of
    tasks the data does not hold, or --text-field for data other than a .jsonl or .parquet
    file or hf:NAME."""
    mix = tasks_of(spec)
    for option in given:
        flag = "--" + option.replace("_", "-")
        if option == "text_field":
            if mix is not None or not (spec.startswith("hf:")
                                       or Path(spec).suffix in FIELD_SUFFIXES):
                raise UsageError(f"{flag}: for --data FILE{', FILE'.join(FIELD_SUFFIXES)} or "
                                 f"hf:NAME, whose rows it names a field of (this is {spec})")
        else:
            _read_by(flag, {**TASK_OPTIONS, **KNOBS}[option], mix, spec)


def open_lengths(spec: str, tokenizer, lengths: list, G: int, seed: int,
                 options: DataOptions = DataOptions(), per_batch: int = 1):
    """The data `spec` names at several lengths ([[L, weight], ...], `fsc train --seq-len
    128,256`): each batch of `per_batch` samples at one length drawn with its weight
    (LengthMix); one length is that length's source alone. An hf: stream is one source read
    on in order at every length (one stream each would show some text twice and skip other).
    Text is cut at a fresh offset each epoch after the first (TextData's `shift`)."""
    if len(lengths) == 1:
        return open_data(spec, tokenizer, lengths[0][0], G, seed, options, shift=True)
    if spec.startswith("hf:"):
        stream = open_data(spec, tokenizer, max(L for L, _ in lengths), G, seed, options)
        mix = LengthMix({L: stream for L, _ in lengths}, [w for _, w in lengths], seed,
                        per_batch)
        stream.length = lambda index: mix.length(index // per_batch)
        return mix
    return LengthMix({L: open_data(spec, tokenizer, L, G, seed, options, shift=True)
                      for L, _ in lengths},
                     [w for _, w in lengths], seed, per_batch)


def _task(name: str, tokenizer, L: int, G: int, options: DataOptions, option: str,
          split: str):
    """The synthetic task `name` (SYNTHETIC) at length L; a corpus haystack reads `split`."""
    if name in SUITE:
        knobs = ruler.RulerOptions(**{"variant": SUITE[name] or "single", **options.suite})
        task = "niah" if SUITE[name] else name
        return ruler.suite_task(task, tokenizer, L, G, knobs, options.needle_digits, split,
                                option, options.supervise_needle)
    knobs = {"passkey": {"digits": options.needle_digits, "needle": options.supervise_needle},
             "mqar": {"pairs": options.pairs}}.get(name, {})
    return TASKS[name](tokenizer, L, G, **knobs, option=option)
