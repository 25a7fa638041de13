"""What `fsc verify` checks and reports, without torch: the dtypes, tolerances and bounds of a
check, `plan` (its G and number of blocks, refused before anything heavy is imported) and the
report's records. The check itself is fsc.verify.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from fsc.blocks import MAX_G
from fsc.errors import UsageError

if TYPE_CHECKING:
    from fsc.recipe import Recipe

DTYPES = ("fp32", "bf16", "fp16")
# fp32 logits: 1e-5 of the largest logit, or absolute where the logits are smaller than 1
# (a trained or imported model's logits reach tens, and fp32 rounding grows with them).
LOGIT_TOL = 1e-5
MIXER_TOL = 1e-5  # relative to the largest output magnitude, on random inputs
# bf16/fp16: max |error| / max |fp32 reference| of a block, for one mixer's outputs: a few
# roundings of the dtype (2^-8 bf16, 2^-11 fp16). Logits pass through every layer: twice that.
# (Measured on the shipped recipes over 1024 tokens: mixers at most 8e-3 in bf16, 32-layer
# logits 2.8e-2; a linear-attention sum kept in bf16 was 100% off, its logits 52%.)
DRIFT_TOL = {"bf16": 3e-2, "fp16": 5e-3}
LOGIT_DRIFT_FACTOR = 2
DRIFT_TOKENS = 1024  # default run in bf16/fp16
EXACT_BLOCKS = 3  # default run in fp32
WINDOW_TOKENS = 4096  # a sliding window up to this long is passed by the default run
MAX_TOKENS = 2**20  # G × blocks; the memory check bounds it further
MAX_BATCH = 1024
MAX_FP32_WEIGHT_BYTES = 512 * 2**20
REDUCED_WIDTH = 256


@dataclass
class Check:
    """One comparison: the model's logits or one mixer kind's outputs, cached against uncached.
    In bf16/fp16 also each block's error relative to its largest reference value: the first,
    the last (the drift) and the worst. A failing check says where it first went wrong."""

    what: str
    kind: str
    max_abs_err: float
    scale: float
    tol: float
    exact: bool
    first_rel_err: float | None = None
    last_rel_err: float | None = None
    max_rel_err: float | None = None
    # where a failing check first goes past its tolerance: the call of the block (fp32, e.g.
    # "the step of block 2, which reads ..."), or the block (bf16/fp16: "block 7 of 256")
    first_wrong: str | None = None


@dataclass
class VerifyReport:
    """What `fsc verify` found, and on what."""

    recipe: str
    checked: str  # the recipe checked: `recipe`, or the same layer plan at a reduced width
    reduced_width: bool
    weights: str  # "seeded" or "checkpoint DIR"
    d_model: int
    G: int
    B: int
    blocks: int
    tokens: int
    dtype: str
    state_dtype: str
    checks: list[Check]
    backends: dict[str, str] = field(default_factory=dict)  # op -> the backend that ran it
    kernels: list[dict] = field(default_factory=list)  # with --backend triton: each kernel

    @property
    def exact(self) -> bool:
        return all(c.exact for c in self.checks) and all(k["ok"] for k in self.kernels)

    def to_dict(self) -> dict:
        """The JSON document (`--json`): the fields, exact, each kind's max error, and in
        bf16/fp16 each kind's drift; checks without the fields their dtype does not fill."""
        doc = asdict(self)
        doc["checks"] = [{k: v for k, v in c.items() if v is not None} for c in doc["checks"]]
        doc["exact"] = self.exact
        doc["max_abs_err"] = {c.kind: c.max_abs_err for c in self.checks}
        if self.dtype != "fp32":
            doc["drift"] = {c.kind: c.last_rel_err for c in self.checks}
        if not self.kernels:
            del doc["kernels"]
        return doc


def plan(recipe: Recipe, dtype: str = "fp32", G: int | None = None, blocks: int | None = None,
         length: int | None = None) -> tuple[int, int]:
    """(G, blocks) of a check, from what a user gave (`length` in tokens instead of blocks)."""
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    if blocks is not None and length is not None:
        raise UsageError("give --blocks or --length, not both")
    exact = dtype == "fp32"
    if G is None:  # the recipe's own: an autoregressive one (G 1) is checked as it decodes
        G = recipe.block_size
    if not 1 <= G <= MAX_G:
        raise UsageError(f"--G {G} must be between 1 and {MAX_G}")
    if exact and G < 2 and recipe.block_size > 1:
        raise UsageError(f"--G {G}: the exactness check of a denoiser (G {recipe.block_size}) "
                         "needs G > 1, where a block sees itself (in bf16 or fp16 any G >= 1)")
    if length is not None:
        if length < 1:
            raise UsageError(f"--length {length} must be at least 1")
        blocks = -(-length // G)
    elif blocks is None:
        blocks = EXACT_BLOCKS if exact else -(-DRIFT_TOKENS // G)
        window = recipe.attention.window if "attention" in recipe.layer_plan else None
        if window:  # past the window, where the cache first drops keys (up to WINDOW_TOKENS):
            # the last block then starts after min(window, WINDOW_TOKENS) cached tokens
            blocks = max(blocks, min(window, WINDOW_TOKENS) // G + 2)
    if blocks < 2:
        asked = f"--length {length} is " if length is not None else ""
        raise UsageError(f"{asked}{blocks} block{'s' * (blocks != 1)} of G {G}: the check needs at "
                         "least 2 (the second reads the cache the first wrote)")
    if G * blocks > MAX_TOKENS:
        raise UsageError(f"{blocks} blocks of G {G} are {G * blocks} tokens; at most {MAX_TOKENS}")
    return G, blocks
