"""An `fsc eval` grid: what it scores (a checkpoint decoded one way, or several ways for
genppl), the cells it spans (lengths × depths for niah, pairs × lengths for mqar, lengths for
vt, cwe, fwe and held-out loss, all of these for ruler, decode settings for genppl) and the
record each cell becomes (`EvalCell`: one eval_cells row). The driver builds and checks the
grid before any model is loaded; every worker gets it as it is. Pure Python: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from fsc.data.ruler import RulerOptions
from fsc.data.sources import DataOptions

DEFAULT_DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass
class EvalSettings:
    mode: str  # diffusion | ar
    steps: int  # K (diffusion)
    samples: int
    batch: int
    seed: int
    train_len: int | None  # the checkpoint's training length (for length ÷ training length)


@dataclass(frozen=True)
class Decoding:
    """One way a genppl cell decodes: mode, G, K, the reveal policy and threshold, sampling
    (temperature, then the cuts top-k, top-p and min-p, and the repetition penalty: as
    fsc.decode.DecodeConfig takes them)."""

    mode: str  # diffusion | ar | reference (the data's own continuations, not decoded)
    G: int
    K: int
    policy: str | None = None
    threshold: float | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    checkpoint: str | None = None  # another checkpoint decoded in this cell (a baseline)


@dataclass(frozen=True)
class GenSettings:
    """genppl: the decodings its cells span and how samples are drawn and scored."""

    decodings: tuple[Decoding, ...]
    prompt_length: int  # tokens of the --data text before each sample (0: from BOS)
    scorer: str  # an fsc AR checkpoint or recipe, or a transformers model directory / id
    ngram: int = 4  # the n of the repeated n-gram fraction
    mauve: bool = False


@dataclass(frozen=True)
class EvalCell:
    """One scored cell: what was scored and how it was decoded, where the cell sits in the
    grid, and what it measured."""

    checkpoint: str
    recipe: str
    recipe_hash: str
    mode: str
    G: int
    K: int
    train_length: int | None
    task: str
    length: int
    depth: float | None = None  # niah
    pairs: int | None = None  # mqar
    length_ratio: float | None = None
    n: int = 0  # items scored: samples (niah, genppl), queries (mqar), sequences (loss)
    correct: int | None = None
    accuracy: float | None = None
    token_accuracy: float | None = None
    loss: float | None = None
    tokens_per_s: float | None = None
    seconds: float | None = None
    # the task's own columns (its knobs and measures), as its module declares them (Task.columns)
    own: Mapping[str, Any] = field(default_factory=dict)

    def get(self, column: str) -> Any:
        """The value of `column`: a field's, or one of the task's own (None if it has none)."""
        if column in self.own:
            return self.own[column]
        return getattr(self, column) if column in SHARED else None

    def columns(self) -> dict[str, Any]:
        """The cell's eval_cells row: what the store writes, `--json` prints and a worker
        sends (`EvalCell.from_row` reads it back): the shared fields, then the task's own."""
        return {**{name: getattr(self, name) for name in SHARED}, **self.own}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> EvalCell:
        """The cell whose `columns()` are `row`."""
        return cls(**{k: v for k, v in row.items() if k in SHARED},
                   own={k: v for k, v in row.items() if k not in SHARED})


SHARED = tuple(f.name for f in fields(EvalCell) if f.name != "own")  # every cell's columns


@dataclass(frozen=True)
class EvalGrid:
    """What every cell of an `fsc eval` run shares, and the axes its cells span."""

    checkpoint: str  # a checkpoint directory, or a recipe (its seeded weights)
    recipe: str
    recipe_hash: str
    G: int  # the block size decoded with (1: autoregressive)
    K: int  # denoising steps per block (0: autoregressive)
    task: str  # niah | mqar | vt | cwe | fwe | loss | genppl
    lengths: tuple[int, ...]  # prompt lengths; loss: sequence lengths; genppl: sample lengths
    depths: tuple[float, ...]  # niah
    pairs: tuple[int, ...]  # mqar
    settings: EvalSettings
    digits: int | None  # niah: the key's digits (None: the default for G)
    data: str | None  # loss, genppl: a corpus, a text file or a task
    options: DataOptions
    tokenizer: str | None  # a tokenizer directory (None: fsc's byte-level one)
    gen: GenSettings | None = None  # genppl
    ruler: RulerOptions = field(default_factory=RulerOptions)  # niah, vt, cwe, fwe: the knobs
    bos: bool = False  # the model's sequences begin with BOS (an imported model's convention)
    changes: tuple[str, ...] = ()  # `fsc eval --set`: weight-free recipe fields changed
    # why its cells may read the checkpoint outside what it learned, or a Gen-PPL flatter or
    # judge nothing (a line each): said when its run starts or resumes, kept in its config
    warnings: tuple[str, ...] = ()

    @property
    def ar(self) -> bool:
        """Decoded autoregressively (a G > 1 checkpoint at G = 1)."""
        return self.settings.mode == "ar"

    def cell(self, measured: dict[str, Any], own: Sequence[str] = ()) -> EvalCell:
        """The record of a cell: the grid's facts, overridden by what `measured` holds (a
        genppl cell names its own mode, G and K), and each of its task's `own` columns (None
        where not measured). ValueError for a measure that is neither shared nor its own: the
        store would refuse it."""
        base = EvalCell(self.checkpoint, self.recipe, self.recipe_hash, self.settings.mode,
                        self.G, self.K, self.settings.train_len, measured["task"],
                        measured["length"])
        unknown = sorted(set(measured) - set(SHARED) - set(own))
        if unknown:
            raise ValueError(f"--task {measured['task']} measured {unknown}, which neither "
                             "EvalCell nor the task's columns declare")
        return replace(base, **{k: v for k, v in measured.items() if k in SHARED},
                       own={k: measured.get(k) for k in own})
