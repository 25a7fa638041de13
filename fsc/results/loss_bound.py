"""Which held-out losses are bounds, and how a table marks them. A block-diffusion checkpoint's
loss (`fsc eval --task loss`) is the masked-diffusion bound of every block, an upper bound on
its NLL; an autoregressive one's (and `--mode ar`'s) is the exact NLL (fsc.eval.loss). The
store keeps no flag for it (`bound` is the harness's): a loss cell is a bound unless it was
scored autoregressively. `fsc eval`'s loss table and `fsc report`'s cells mark the bound's
numbers `≤ 3.2841`, with LEGEND under the table."""

from __future__ import annotations

from typing import Any

MARK = "≤"
LEGEND = f"{MARK}: an upper bound on the NLL (a block-diffusion model's ELBO, by Monte Carlo)"


def is_bound(cell: Any) -> bool:
    """Whether a cell's loss (an eval row, or an fsc.eval.grid.EvalCell) is the bound."""
    return cell.get("loss") is not None and cell.get("mode") != "ar"


def prefix(cell: Any) -> str:
    """What a table writes before a cell's loss (and its bits/byte): `≤ ` for a bound."""
    return f"{MARK} " if is_bound(cell) else ""
