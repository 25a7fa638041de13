"""An `fsc eval` grid: what it scores (a checkpoint decoded one way), the cells it spans
(lengths × depths for niah, pairs × lengths for mqar, lengths for held-out loss) and the record
each cell becomes (`EvalCell`: one eval_cells row). The driver builds and checks the grid before
any model is loaded; every worker gets it as it is. Pure Python: no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from fsc.errors import UsageError
from fsc.train.data import DataOptions, open_data
from fsc.train.tasks import MQAR, Passkey

DEFAULT_DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)
LOSS_ONLY = ("loss", "loss_se", "distinct_sequences")  # columns only a loss cell has


@dataclass
class EvalSettings:
    mode: str  # diffusion | ar
    steps: int  # K (diffusion)
    samples: int
    batch: int
    seed: int
    train_len: int | None  # the checkpoint's training length (for length ÷ training length)


@dataclass(frozen=True)
class EvalCell:
    """One scored cell: what was scored and how it was decoded (the same in every cell of a
    run), where the cell sits in the grid, and what it measured."""

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
    n: int = 0  # items scored: samples (niah), queries (mqar), sequences (loss)
    correct: int | None = None
    accuracy: float | None = None
    token_accuracy: float | None = None
    loss: float | None = None
    loss_se: float | None = None
    distinct_sequences: int | None = None
    tokens_per_s: float | None = None
    seconds: float | None = None

    def columns(self) -> dict[str, Any]:
        """The cell's eval_cells row: what the store writes, `--json` prints and a worker
        sends (`EvalCell(**row)` reads it back). The held-out loss's columns are in a loss
        cell's row only."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if self.task == "loss" or f.name not in LOSS_ONLY}


@dataclass(frozen=True)
class EvalGrid:
    """What every cell of an `fsc eval` run shares, and the axes its cells span."""

    checkpoint: str  # a checkpoint directory, or a recipe (its seeded weights)
    recipe: str
    recipe_hash: str
    G: int  # the block size decoded with (1: autoregressive)
    K: int  # denoising steps per block (0: autoregressive)
    task: str  # niah | mqar | loss
    lengths: tuple[int, ...]
    depths: tuple[float, ...]  # niah
    pairs: tuple[int, ...]  # mqar
    settings: EvalSettings
    digits: int | None  # niah: the key's digits (None: the default for G)
    data: str | None  # loss: a text file or a task
    options: DataOptions
    tokenizer: str | None  # a tokenizer directory (None: fsc's byte-level one)

    @property
    def ar(self) -> bool:
        """Decoded autoregressively (a G > 1 checkpoint at G = 1)."""
        return self.settings.mode == "ar"

    @property
    def cells_per_length(self) -> int:
        return {"niah": len(self.depths), "mqar": len(self.pairs), "loss": 1}[self.task]

    def cell(self, measured: dict[str, Any]) -> EvalCell:
        """The record of a cell: the grid's facts and what `measured` holds."""
        return EvalCell(self.checkpoint, self.recipe, self.recipe_hash, self.settings.mode,
                        self.G, self.K, self.settings.train_len, **measured)

    def prompts(self, tokenizer, length: int, pairs: int | None = None) -> Passkey | MQAR:
        """The task whose samples fill a niah cell at `length`, or an mqar cell at `length`
        with `pairs`; UsageError (naming --lengths) when the length is too short for it."""
        if self.task == "niah":
            return Passkey(tokenizer, length, self.G, self.digits, option="--lengths", split="val")
        return MQAR(tokenizer, length, self.G, pairs, option="--lengths", split="val")

    def check(self, tokenizer) -> None:
        """UsageError, before any model is loaded, for a length that is no multiple of G or too
        short for a cell's prompts, and for data the task cannot take."""
        for n in self.lengths:
            if n % self.G:
                raise UsageError(f"--lengths: {n} is not a multiple of the block size G = {self.G}")
        if self.task == "loss":
            if self.data is None:
                raise UsageError("--task loss needs --data (a text file or a task)")
            for n in self.lengths:  # a bad file, up front
                open_data(self.data, tokenizer, n, self.G, self.settings.seed, self.options,
                          option="--lengths", split="val")
        elif self.data is not None:
            raise UsageError(f"--data is for --task loss; --task {self.task} makes its own prompts")
        for n in self.lengths:
            if self.task == "niah":
                self.prompts(tokenizer, n)
            elif self.task == "mqar":
                for p in self.pairs:
                    self.prompts(tokenizer, n, p)
