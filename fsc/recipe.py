"""Recipes: YAML → validated `Recipe` → layer plan and content hash.

The schema rejects unknown keys. Every error names the file, the field, the bad value and what is
allowed; `load_recipe` raises `RecipeError` with that one-line message.
"""

from __future__ import annotations

import hashlib
import json
import math
import typing
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fsc.errors import RecipeError

MIXERS = ("attention", "mamba", "linear", "gla")
PATTERN_LETTERS = {"A": "attention", "M": "mamba", "L": "linear", "G": "gla"}
LETTER_OF = {v: k for k, v in PATTERN_LETTERS.items()}
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

Pos = Annotated[int, Field(gt=0)]
DType = Literal["bf16", "fp16", "fp32"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Placement(_Strict):
    """Where one mixer goes: explicit 1-based positions, every k-th layer, or a count."""

    positions: list[int] | None = None
    every: Pos | None = None
    count: Pos | None = None
    placement: Literal["uniform", "back_dense"] | None = None

    @model_validator(mode="after")
    def _one_way(self):
        given = [k for k in ("positions", "every", "count") if getattr(self, k) is not None]
        if not given:
            raise ValueError("give one of positions, every or count")
        if self.every is not None and len(given) > 1:
            raise ValueError("every cannot be combined with positions or count")
        if self.positions is not None:
            if len(set(self.positions)) != len(self.positions):
                raise ValueError(f"positions {self.positions} has duplicates")
            if self.count is not None and self.count != len(self.positions):
                raise ValueError(
                    f"positions has {len(self.positions)} entries but count is {self.count}"
                )
            if self.placement is not None:
                raise ValueError("placement applies to count, not to explicit positions")
        if self.placement is not None and self.count is None:
            raise ValueError("placement needs count")
        return self

    def resolve(self, n_layers: int) -> list[int]:
        """1-based layer positions for a stack of `n_layers`."""
        if self.positions is not None:
            bad = [p for p in self.positions if not 1 <= p <= n_layers]
            if bad:
                raise ValueError(f"position {bad[0]} is outside 1..{n_layers}")
            return sorted(self.positions)
        if self.every is not None:
            return list(range(self.every, n_layers + 1, self.every))
        if self.count > n_layers:
            raise ValueError(f"count {self.count} exceeds n_layers {n_layers}")
        if (self.placement or "uniform") == "uniform":
            return _spread(self.count, 0, n_layers)
        # back_dense: a third of the layers spread over the front half, the rest over the back.
        half = n_layers // 2
        front = min(self.count // 3, half)
        back = self.count - front
        if back > n_layers - half:
            front, back = self.count - (n_layers - half), n_layers - half
        return _spread(front, 0, half) + _spread(back, half, n_layers)


def _spread(count: int, lo: int, hi: int) -> list[int]:
    """`count` positions spread evenly over (lo, hi], the last one at hi."""
    span = hi - lo
    return [lo + math.floor((i + 1) * span / count + 0.5) for i in range(count)] if count else []


class Layers(_Strict):
    default: Literal["attention", "mamba", "linear", "gla"] | None = None
    pattern: str | None = None
    attention: Placement | None = None
    mamba: Placement | None = None
    linear: Placement | None = None
    gla: Placement | None = None

    @model_validator(mode="after")
    def _one_way(self):
        placed = [m for m in MIXERS if getattr(self, m) is not None]
        if self.pattern is not None:
            if self.default is not None or placed:
                raise ValueError("pattern cannot be combined with default or per-mixer entries")
            if not self.pattern:
                raise ValueError("pattern is empty; use letters A, M, L, G")
            bad = sorted(set(self.pattern) - set(PATTERN_LETTERS))
            if bad:
                raise ValueError(
                    f"pattern {self.pattern!r} has unknown letter {bad[0]!r}; "
                    "allowed: A (attention), M (mamba), L (linear), G (gla)"
                )
        elif self.default is None and not placed:
            raise ValueError("give default (plus optional per-mixer entries) or pattern")
        return self


class AttentionCfg(_Strict):
    n_heads: Pos
    n_kv_heads: Pos | None = None
    head_dim: Pos | None = None
    rope_theta: Annotated[float, Field(gt=0)] = 10000.0


class MambaCfg(_Strict):
    d_state: Pos = 16
    expand: Pos = 2
    d_conv: Pos = 4
    head_dim: Pos = 64


class LinearCfg(_Strict):
    n_heads: Pos
    feature_map: Literal["elu1", "relu", "identity"] = "elu1"
    feature_dim: Pos | None = None
    eps: Annotated[float, Field(gt=0)] = 1e-6


class GlaCfg(_Strict):
    n_heads: Pos
    head_dim: Pos | None = None
    gate_logit_normalizer: Annotated[float, Field(gt=0)] = 16.0


class MlpCfg(_Strict):
    hidden_ratio: Annotated[float, Field(gt=0)] = 4


class MoeCfg(_Strict):
    n_experts: Pos
    top_k: Pos = 2
    hidden_ratio: Annotated[float, Field(gt=0)] = 4

    @model_validator(mode="after")
    def _k(self):
        if self.top_k > self.n_experts:
            raise ValueError(f"top_k {self.top_k} exceeds n_experts {self.n_experts}")
        return self


_NEEDS = {"attention": "n_heads", "linear": "n_heads", "gla": "n_heads"}


class Recipe(_Strict):
    name: Annotated[str, Field(min_length=1)]
    d_model: Pos
    n_layers: Pos
    vocab_size: Pos
    block_size: Pos = 1
    dtype: DType = "bf16"
    state_dtype: DType = "fp32"
    norm_eps: Annotated[float, Field(gt=0)] = 1e-5
    layers: Layers
    attention: AttentionCfg | None = None
    mamba: MambaCfg | None = None
    linear: LinearCfg | None = None
    gla: GlaCfg | None = None
    mlp: MlpCfg | None = None
    moe: MoeCfg | None = None

    @model_validator(mode="after")
    def _consistent(self):
        if self.mlp is not None and self.moe is not None:
            raise ValueError("give mlp or moe, not both")
        plan = self._resolve_plan()
        for kind in sorted(set(plan)):
            if getattr(self, kind) is None:
                if kind in _NEEDS:
                    raise ValueError(
                        f"layers use {kind} but the recipe has no {kind} section "
                        f"(it needs at least {_NEEDS[kind]})"
                    )
                object.__setattr__(self, kind, MambaCfg())
        if self.attention is not None:
            a = self.attention
            kv = a.n_kv_heads or a.n_heads
            if a.n_heads % kv:
                raise ValueError(f"attention.n_heads {a.n_heads} is not a multiple of n_kv_heads {kv}")
            if a.head_dim is None and self.d_model % a.n_heads:
                raise ValueError(
                    f"attention.n_heads {a.n_heads} does not divide d_model {self.d_model}; "
                    "give head_dim"
                )
        if self.mamba is not None and (self.mamba.expand * self.d_model) % self.mamba.head_dim:
            raise ValueError(
                f"mamba.head_dim {self.mamba.head_dim} does not divide "
                f"d_inner {self.mamba.expand * self.d_model} (expand × d_model)"
            )
        for kind in ("linear", "gla"):
            cfg = getattr(self, kind)
            explicit = getattr(cfg, "head_dim", None)
            if cfg is not None and explicit is None and self.d_model % cfg.n_heads:
                raise ValueError(f"{kind}.n_heads {cfg.n_heads} does not divide d_model {self.d_model}")
        return self

    # -- derived -------------------------------------------------------------------------------
    def _resolve_plan(self) -> list[str]:
        lay, n = self.layers, self.n_layers
        if lay.pattern is not None:
            p = lay.pattern
            if n % len(p):
                raise ValueError(f"pattern length {len(p)} does not divide n_layers {n}")
            return [PATTERN_LETTERS[c] for c in p * (n // len(p))]
        plan: list[str | None] = [lay.default] * n
        owner: dict[int, str] = {}
        for kind in MIXERS:
            placement = getattr(lay, kind)
            if placement is None:
                continue
            try:
                positions = placement.resolve(n)
            except ValueError as e:
                raise ValueError(f"layers.{kind}: {e}") from None
            for p in positions:
                if p in owner:
                    raise ValueError(f"layer {p} is claimed by both {owner[p]} and {kind}")
                owner[p] = kind
                plan[p - 1] = kind
        if None in plan:
            missing = plan.index(None) + 1
            raise ValueError(f"layer {missing} has no mixer: give layers.default")
        return plan

    @property
    def layer_plan(self) -> list[str]:
        """Mixer name of each layer, layer 1 first."""
        return self._resolve_plan()

    @property
    def layer_map(self) -> str:
        """Pattern letters in groups of four, e.g. ``MMMA MMMA``."""
        s = "".join(LETTER_OF[k] for k in self.layer_plan)
        return " ".join(s[i : i + 4] for i in range(0, len(s), 4))

    @property
    def recipe_hash(self) -> str:
        """Content hash of the validated recipe (comments and key order do not matter)."""
        canon = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    @property
    def mlp_cfg(self) -> MlpCfg | None:
        return None if self.moe is not None else (self.mlp or MlpCfg())

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json", exclude_none=True), sort_keys=False)

    def with_dtype(self, dtype: str) -> Recipe:
        """The same recipe with weights and activations in `dtype` (bf16, fp16, fp32)."""
        return self if dtype == self.dtype else self.model_copy(update={"dtype": dtype})

    def with_width(self, d_model: int, vocab_size: int | None = None) -> Recipe:
        """The same layer plan at another width (heads scaled to keep head sizes valid)."""
        data = self.model_dump(mode="json", exclude_none=True)
        scale = d_model / self.d_model
        data["d_model"] = d_model
        data["name"] = f"{self.name}@d{d_model}"
        if vocab_size is not None:
            data["vocab_size"] = vocab_size
        for kind, dim_key in (("attention", "head_dim"), ("linear", "feature_dim"), ("gla", "head_dim")):
            cfg = data.get(kind)
            if cfg is None:
                continue
            heads = max(1, round(cfg["n_heads"] * scale))
            if kind == "attention":
                kv = cfg.get("n_kv_heads", cfg["n_heads"])
                group = cfg["n_heads"] // kv
                kv = max(1, heads // group)
                heads = kv * group
                cfg["n_kv_heads"] = kv
            while d_model % heads:
                heads -= 1
            cfg["n_heads"] = heads
            cfg.pop(dim_key, None)
        if "mamba" in data:
            m = data["mamba"]
            d_inner = m.get("expand", 2) * d_model
            hd = m.get("head_dim", 64)
            while d_inner % hd:
                hd //= 2
            m["head_dim"] = max(hd, 1)
        return Recipe.model_validate(data)


def _allowed_keys(loc: tuple) -> list[str]:
    """Field names of the schema section at `loc` (e.g. ('mamba',) -> MambaCfg's fields)."""
    model: type[BaseModel] | None = Recipe
    for part in loc:
        field = model.model_fields.get(part) if model is not None and isinstance(part, str) else None
        if field is None:
            return []
        model = next((a for a in typing.get_args(field.annotation) or (field.annotation,)
                      if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return list(model.model_fields) if model is not None else []


def _format_error(source: str, err: ValidationError) -> str:
    e = err.errors(include_url=False)[0]
    loc = ".".join(str(p) for p in e["loc"])
    msg = e["msg"].removeprefix("Value error, ")
    where = f"{source}: {loc}: " if loc else f"{source}: "
    if e["type"] == "extra_forbidden":
        allowed = _allowed_keys(e["loc"][:-1])
        hint = f"; allowed here: {', '.join(allowed)}" if allowed else ""
        return f"{where}unknown key{hint}"
    if e["type"] == "missing":
        return f"{where}required field is missing"
    if e["type"].startswith(("literal_error", "enum")):
        return f"{where}{e['input']!r} is not allowed: {msg.lower()}"
    inp = e.get("input")
    shown = "" if isinstance(inp, dict) or "value" in msg else f" (got {inp!r})"
    return f"{where}{msg}{shown}"


def parse_recipe(data: object, source: str = "<recipe>") -> Recipe:
    """Validate already-parsed YAML/JSON data."""
    if data is None:
        raise RecipeError(f"{source}: file is empty; a recipe needs name, d_model, n_layers, ...")
    if not isinstance(data, dict):
        raise RecipeError(f"{source}: expected a mapping of recipe fields, got {type(data).__name__}")
    try:
        return Recipe.model_validate(data)
    except ValidationError as err:
        raise RecipeError(_format_error(source, err)) from None


def shipped_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "recipes"


def resolve_path(ref: str | Path) -> Path:
    """A recipe path, or the name of a shipped recipe (``tiny_hybrid``)."""
    p = Path(ref)
    if p.exists():
        return p
    shipped = shipped_dir() / f"{ref}.yaml"
    if not p.suffix and shipped.exists():
        return shipped
    raise RecipeError(f"{ref}: no such recipe file (and no shipped recipe of that name; see `fsc recipes`)")


def load_recipe(ref: str | Path) -> Recipe:
    path = resolve_path(ref)
    if path.is_dir():
        raise RecipeError(f"{path}: is a directory, not a recipe file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise RecipeError(f"{path}: cannot read ({e})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise RecipeError(f"{path}: YAML syntax error{at}: {problem}") from None
    return parse_recipe(data, str(path))


def shipped_recipes() -> dict[str, Path]:
    return {p.stem: p for p in sorted(shipped_dir().glob("*.yaml"))}
