"""Synthetic tasks mixed into one `--data` source: `ruler` (the RULER-style suite, each task
weighted 1) or a list `TASK[:WEIGHT],...` such as `passkey:2,vt:1,cwe:1` (a weight left out is
1). Each sample's task is drawn from the run's seed and the sample's index with the weights,
and the sample itself as that task alone would draw it: the n-th sample is the same however a
run was split by resumes. Training at several lengths (`--seq-len 128,256`, LengthMix) draws
each batch's length the same way. Pure Python: no torch."""

from __future__ import annotations

import random
from collections.abc import Callable

from fsc.data.tasks import Sample, TooShort
from fsc.errors import UsageError
from fsc.seeds import derive

RULER = ("passkey", "niah_multikey", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe")


def parse_mix(spec: str, tasks) -> list[tuple[str, float]] | None:
    """The (task, weight) pairs `spec` names, or None when it names no mix (a single task, a
    corpus, a file); UsageError for a weight that is not a number, is negative, or weights
    that sum to zero."""
    if spec == "ruler":
        return [(t, 1.0) for t in RULER]
    parts = [p.strip().partition(":") for p in spec.split(",")]
    if not all(name in tasks for name, _, _ in parts) or spec in tasks:
        return None
    return weighted(spec, "--data")


def weighted(spec: str, option: str) -> list[tuple[str, float]]:
    """`NAME[:WEIGHT],...` as (name, weight) pairs, a weight left out 1; UsageError (naming
    `option`) for an empty name, a name given twice, a weight that is not a number, is
    negative, or weights that sum to zero."""
    mix = []
    for name, colon, weight in (p.strip().partition(":") for p in spec.split(",")):
        if not name:
            raise UsageError(f"{option} {spec}: an empty entry (a comma too many, or a "
                             "weight with nothing before its colon)")
        try:
            w = float(weight) if colon else 1.0
        except ValueError:
            raise UsageError(f"{option} {spec}: the weight of {name}, {weight!r}, is not a "
                             "number") from None
        if not w >= 0 or w == float("inf"):
            raise UsageError(f"{option} {spec}: the weight of {name} is {weight}; a weight is "
                             "a finite number >= 0")
        if name in (n for n, _ in mix):
            raise UsageError(f"{option} {spec}: {name} is given twice; give it once, with the "
                             "weight of both")
        mix.append((name, w))
    if sum(w for _, w in mix) <= 0:
        raise UsageError(f"{option} {spec}: the weights sum to zero; give one a weight above 0")
    return mix


class MixData:
    """Samples of several tasks, each drawn with its weight (`tasks` and `weights` in the
    order given; `make(name)` builds a task's TaskData-like source). `tasks` are those drawn:
    a task of weight 0 is never trained on, so the in-loop eval leaves it out."""

    def __init__(self, spec: str, mix: list[tuple[str, float]], make: Callable, seed: int):
        self.name, self.seed = spec, seed
        self.sources, short = [], []
        for name, _ in mix:  # a length too short: said once, with the most any task needs
            try:
                self.sources.append(make(name))
            except TooShort as e:
                short.append(e)
        if short:
            raise max(short, key=lambda e: e.need)
        self.tasks = [s.task for s, (_, w) in zip(self.sources, mix, strict=True) if w > 0]
        self.weights = [w for _, w in mix]
        self.supervises = "answer"

    def sample(self, index: int) -> Sample:
        rng = random.Random(derive(self.seed, index, 4))
        source = rng.choices(self.sources, self.weights)[0]
        return source.sample(index)


class LengthMix:
    """Samples at several lengths (`fsc train --seq-len 128,256`): each batch of `per_batch`
    samples (a micro-batch of the global batch) is drawn at one length, chosen with its weight
    from the seed and the batch's index, and its samples are those that length's source
    (`sources`, length -> a TaskData-like source) draws: the n-th sample is the same however a
    run was split by resumes. The in-loop eval reads the longest length's tasks."""

    def __init__(self, sources: dict, weights: list[float], seed: int, per_batch: int):
        self.sources, self.weights, self.seed, self.per_batch = sources, weights, seed, per_batch
        self.lengths = list(sources)
        longest = sources[max(self.lengths)]
        self.name, self.supervises = longest.name, longest.supervises
        self.tasks = getattr(longest, "tasks", None) or (
            [longest.task] if hasattr(longest, "task") else None)
        if hasattr(longest, "task"):
            self.task = longest.task

    def length(self, batch: int) -> int:
        """The length of batch number `batch` (sample `batch * per_batch` and the next ones)."""
        return random.Random(derive(self.seed, batch, 12)).choices(self.lengths, self.weights)[0]

    def sample(self, index: int) -> Sample:
        return self.sources[self.length(index // self.per_batch)].sample(index)
