"""A training run's settings (`TrainConfig`), what it logs and returns (`TrainStep`,
`TrainResult`), and the schedules the loop follows from them: the learning rate (`lr_at`) and
the annealed block size (`block_at`). Pure: no torch."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from fsc.data.sources import DataOptions, open_lengths

OBJECTIVES = ("frontier", "blocks", "ar")
SAVE_MINUTES = 10.0  # the default wall time between rolling saves
KEEP = 3  # the default number of rolling saves kept


@dataclass
class TrainConfig:
    source: str  # recipe name/path, or the checkpoint the run started from
    data: str
    seq_len: int  # the longest of `lengths` when there are several
    steps: int
    out: str
    objective: str = "frontier"
    weighting: str | None = "elbo"  # of a denoiser's loss: elbo (1/t) or masked (see
    # objective.py); None for an autoregressive run, which has no masked positions to weight
    batch: int = 8
    accum: int = 1
    lr: float = 3e-3
    warmup: int = 50
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    device: str = "cpu"
    dtype: str = "fp32"  # of the computation: bf16 autocasts on CUDA; weights stay fp32
    train_backend: str = "auto"  # recurrent mixers' training forms: torch, fla or auto (fla_scan)
    save_every: int = 0  # milestone saves every N steps (0: none)
    save_minutes: float = SAVE_MINUTES  # a rolling save after this much wall time (0: none)
    keep: int = KEEP  # rolling saves kept, newest first (0: all)
    eval_every: int = 0
    log_every: int = 10
    needle_digits: int | None = None  # None: the default for G (tasks.key_digits)
    supervise_needle: bool = False
    pairs: int = 8
    text_field: str = "text"
    suite: dict = field(default_factory=dict)  # the RULER-style tasks' knobs given (--hops, ...)
    tokenizer: str | None = None
    recipe_yaml: str = ""  # the recipe trained (G = 1 for objective ar)
    nproc: int = 1  # data-parallel processes (torchrun); the global batch is nproc × batch
    stop_at: float | None = None  # end at the first in-loop eval with this exact match
    # each sequence's fixed-state layers start from the state the same row of the previous
    # step's batch ended in (fsc.model.cache.Carry); attention layers start empty
    state_passing: bool = False
    # an autoregressive checkpoint adapted into a denoiser (fsc train CKPT --G N): the
    # checkpoint, its recipe's name and hash, and its G; None for any other run
    adapted_from: dict | None = None
    # a run that started from a checkpoint's weights at its own G (not an adaptation): the
    # checkpoint, its recipe hash, the steps and data it was trained on, the published model
    # it was imported from (`fsc.train.run.started_from`); None for any other run
    started_from: dict | None = None
    mask_added: dict | None = None  # adapting: the mask token added to the tokenizer {token, id}
    anneal: int = 0  # steps over which the block size grows from 1 to G (`block_at`; 0: none)
    # several lengths (--seq-len 128,256): [[L, weight], ...], each micro-batch at one drawn
    # with its weight (fsc.data.mix.LengthMix); None: every sequence seq_len long
    lengths: list | None = None
    # mixer kinds whose layers' mixers keep the weights the run starts from (--freeze mamba):
    # the norms and MLPs around them, and every other layer, train
    freeze: list = field(default_factory=list)
    # a text file's "SIZE:SHA256" as the run last read it (fsc.data.sources.file_digest): a
    # resume says when the file has changed since; None for any other data
    data_digest: str | None = None

    def data_options(self) -> DataOptions:
        return DataOptions(self.needle_digits, self.pairs, self.text_field,
                           self.supervise_needle, self.suite)

    def length_mix(self) -> list:
        """The lengths trained at, [[L, weight], ...]: `lengths`, or seq_len alone."""
        return self.lengths or [[self.seq_len, 1.0]]

    def open_data(self, tokenizer, G: int):
        """The run's samples: `data` at its lengths, a micro-batch of the global batch at one."""
        return open_lengths(self.data, tokenizer, self.length_mix(), G, self.seed,
                            self.data_options(), self.batch * self.nproc)


@dataclass
class TrainStep:
    """A logged step of a run (every --log-every steps, and at an in-loop eval): one row of the
    store's train_steps table, `row()` its columns."""
    recipe: str
    recipe_hash: str
    objective: str
    data: str
    step: int
    loss: float
    lr: float
    grad_norm: float  # before clipping
    tokens: int  # read by this invocation so far
    tokens_per_s: float  # of this step
    elapsed_s: float  # since this invocation began training
    eval_accuracy: float | None = None  # exact match of the in-loop eval (--eval-every)

    def row(self) -> dict:
        return asdict(self)


@dataclass
class TrainResult:
    step: int
    checkpoint: str
    losses: list[float] = field(default_factory=list)
    interrupted: bool = False
    seconds: float = 0.0  # the whole loop's: the steps, in-loop evals and saves
    tokens: int = 0
    stop_signal: int = 0  # the signal that interrupted the run (fsc.interrupts)
    reached: bool = False  # stopped by --stop-at: an in-loop eval reached cfg.stop_at
    step_seconds: float = 0.0  # of the training steps alone (their tokens per second)

    @property
    def final_loss(self) -> float:
        return self.losses[-1] if self.losses else float("nan")


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Linear warmup over `warmup` steps, then cosine decay to min_lr_ratio × lr at `steps`."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(cfg.steps - cfg.warmup, 1)
    cos = 0.5 * (1 + math.cos(math.pi * min(step - cfg.warmup, span) / span))
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cos)


def block_sizes(G: int) -> list[int]:
    """The block sizes an annealed run passes through: the powers of two that divide G, from
    1, then G itself (8: 1, 2, 4, 8; 12: 1, 2, 4, 12; 5: 1, 5)."""
    sizes = [1]
    while G % (sizes[-1] * 2) == 0 and sizes[-1] * 2 < G:
        sizes.append(sizes[-1] * 2)
    return sizes + [G]


def block_at(anneal: int, G: int, step: int) -> int:
    """The block size the objective draws at `step` (0-based): with `anneal` > 0 each size of
    `block_sizes(G)` below G for an equal share of the first `anneal` steps, then G. At 1 a
    token reads no later token (the causal mask an autoregressive model was trained under),
    at G its whole block: DiffuLLaMA's attention annealed from causal to bidirectional, as
    block-causal growth every mixer has (docs/training.md)."""
    if step >= anneal:
        return G
    below = block_sizes(G)[:-1]
    return below[step * len(below) // anneal]
