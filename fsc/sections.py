"""The building blocks of the recipe schema, shared by the recipe and every mixer's section.

A `Section` is strict (true is not 1, 1.0 is not 1, "1" is not 1; an int is still a valid
float), frozen, and refuses unknown keys. A validator that finds a broken rule raises `Bad`,
which the recipe loader turns into one line naming the field, the value and what is allowed.
The bounds are far beyond any published model (the largest known in brackets), so that a
slipped digit is refused at load instead of becoming an hour-long build or a MemoryError.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

MAX_NAME = 128  # characters
MAX_LAYERS = 1024  # n_layers [126, Llama 3.1 405B]
MAX_WIDTH = 65536  # d_model [18,432, PaLM 540B]
MAX_VOCAB = 2**22  # vocab_size [262,144, Gemma 3]
MAX_BLOCK = 4096  # block_size G [1,024 in block-diffusion papers]
MAX_HEADS = 1024  # n_heads, n_kv_heads [128]
MAX_HEAD_DIM = 1024  # head_dim [256]
MAX_STATE = 1024  # mamba d_state [256]
MAX_EXPAND = 16  # mamba expand [2]
MAX_CONV = 64  # mamba d_conv [4]
MAX_FEATURES = 4096  # linear feature_dim r [273, Based's Taylor map]
MAX_EXPERTS = 1024  # moe n_experts [512, Qwen3-Next]
MAX_RATIO = 64  # mlp/moe hidden_ratio [8]
EPS_RANGE = {"ge": 1e-12, "le": 1.0}  # norm_eps, linear.eps: fp32 keeps 1e-12 > 0


# The `json_schema_extra` of a field added after recipes were first hashed: at its default the
# field is left out of the recipe hash, so a recipe that does not use it keeps its hash.
ADDED = {"added": True}


class Bad(ValueError):
    """A rule a recipe breaks: where (keys under the section whose validator found it), the
    problem, the value, and what is allowed."""

    def __init__(self, field: tuple, problem: str, got: object = ..., allowed: str = ""):
        super().__init__(problem)
        self.field, self.problem, self.got, self.allowed = field, problem, got, allowed

    def under(self, *prefix: str) -> Bad:
        return Bad((*prefix, *self.field), self.problem, self.got, self.allowed)


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def hashed_fields(self) -> dict:
        """The JSON fields the recipe hash covers: every field, except an ADDED one at its
        default; nested sections likewise."""
        out = {}
        dumped = self.model_dump(mode="json")
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if field.json_schema_extra == ADDED and value == field.default:
                continue
            out[name] = value.hashed_fields() if isinstance(value, Section) else dumped[name]
        return out


def heads_dividing(d_model: int, kind: str, n_heads: int, head_dim: int | None,
                   explicit_ok: bool = True) -> None:
    """Bad unless n_heads divides d_model (or, where allowed, head_dim is given)."""
    if (head_dim is None or not explicit_ok) and d_model % n_heads:
        raise Bad((kind, "n_heads"), f"does not divide d_model {d_model}", n_heads,
                  "a divisor of d_model" + (", or an explicit head_dim" if explicit_ok else ""))


def rescaled_heads(cfg: dict, d_model: int, scale: float, dim_key: str | None) -> dict:
    """A section's heads at another width: scaled, then lowered until they divide d_model;
    the explicit per-head size (`dim_key`) dropped so that it follows from the width."""
    heads = max(1, round(cfg["n_heads"] * scale))
    while d_model % heads:
        heads -= 1
    cfg["n_heads"] = heads
    if dim_key is not None:
        cfg.pop(dim_key, None)
    return cfg


class HeadDims(NamedTuple):
    n_heads: int
    head_dim: int  # Dk = Dv


def head_dims(cfg, d_model: int) -> HeadDims:
    """Heads and their size for a section with `n_heads` and an optional `head_dim` (default
    d_model / n_heads)."""
    return HeadDims(cfg.n_heads, cfg.head_dim or d_model // cfg.n_heads)


def square_state_rules(kind: str):
    """The rules and width change of a section of `n_heads` and an optional `head_dim` whose
    heads keep a [head_dim, head_dim] state (gla): (check, at_width)."""

    def check(cfg, d_model: int) -> None:
        heads_dividing(d_model, kind, cfg.n_heads, cfg.head_dim)

    def at_width(cfg: dict, d_model: int, scale: float) -> dict:
        return rescaled_heads(cfg, d_model, scale, "head_dim")

    return check, at_width
