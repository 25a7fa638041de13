"""Recipes: YAML → validated `Recipe` → layer plan and content hash.

The schema is strict: unknown keys, booleans or text where a number belongs, non-finite numbers,
sizes beyond any real model (the bounds below, listed in docs/models.md) and sections that place
or configure nothing are refused. `load_recipe` raises `RecipeError` with one line:
``<file>: <field.path>: <problem> (got <value>); allowed: <what is>``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import types
import typing
from collections import Counter
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from fsc.errors import RecipeError
from fsc.recipe_yaml import MAX_SHOWN, one_line, parse_yaml, read_text, show, source_name

MIXERS = ("attention", "mamba", "linear", "gla")
PATTERN_LETTERS = {"A": "attention", "M": "mamba", "L": "linear", "G": "gla"}
LETTER_OF = {v: k for k, v in PATTERN_LETTERS.items()}
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
DType = Literal["bf16", "fp16", "fp32"]

# Upper bounds that no published model reaches (the largest known in brackets), so that a slipped
# digit is refused at load instead of becoming an hour-long build or a MemoryError.
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
MAX_EXPERTS = 1024  # moe n_experts [384, Kimi K2]
MAX_RATIO = 64  # mlp/moe hidden_ratio [8]
EPS_RANGE = {"ge": 1e-12, "le": 1.0}  # norm_eps, linear.eps: fp32 keeps 1e-12 > 0


class _Bad(ValueError):
    """A rule a recipe breaks: where (keys under the section whose validator found it), the
    problem, the value, and what is allowed."""

    def __init__(self, field: tuple, problem: str, got: object = ..., allowed: str = ""):
        super().__init__(problem)
        self.field, self.problem, self.got, self.allowed = field, problem, got, allowed

    def under(self, *prefix: str) -> _Bad:
        return _Bad((*prefix, *self.field), self.problem, self.got, self.allowed)


class _Section(BaseModel):
    # strict: true is not 1, 1.0 is not 1, "1" is not 1 (an int is still a valid float)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Placement(_Section):
    """Where one mixer goes: explicit 1-based positions, every k-th layer, or a count."""

    positions: list[int] | None = Field(None, max_length=MAX_LAYERS,
                                        description="distinct layer numbers 1..n_layers")
    every: int | None = Field(None, ge=1, le=MAX_LAYERS)
    count: int | None = Field(None, ge=1, le=MAX_LAYERS)
    placement: Literal["uniform", "back_dense"] | None = None

    @model_validator(mode="after")
    def _one_way(self):
        given = [k for k in ("positions", "every", "count") if getattr(self, k) is not None]
        ways = "one of positions, every or count"
        if not given:
            raise _Bad((), "no placement given", allowed=ways)
        if self.every is not None and len(given) > 1:
            raise _Bad(("every",), "cannot be combined with positions or count", allowed=ways)
        if self.positions is not None:
            if not self.positions:
                raise _Bad(("positions",), "is empty: it places no layer", self.positions,
                           "at least one layer number")
            twice = next((p for p, n in Counter(self.positions).items() if n > 1), None)
            if twice is not None:
                raise _Bad(("positions",), f"layer {twice} is listed twice", self.positions)
            if self.count is not None and self.count != len(self.positions):
                raise _Bad(("count",), f"positions has {len(self.positions)} entries but count "
                           f"is {self.count}", self.count, "the number of positions, or no count")
            if self.placement is not None:
                raise _Bad(("placement",), "applies to count, not to explicit positions")
        if self.placement is not None and self.count is None:
            raise _Bad(("placement",), "needs count", self.placement)
        return self

    def resolve(self, n_layers: int) -> list[int]:
        """1-based layer positions for a stack of `n_layers`; never empty."""
        if self.positions is not None:
            bad = [p for p in self.positions if not 1 <= p <= n_layers]
            if bad:
                raise _Bad(("positions",), f"position {bad[0]} is outside 1..{n_layers}",
                           self.positions, f"layer numbers 1..{n_layers}")
            return sorted(self.positions)
        if self.every is not None:
            if self.every > n_layers:
                raise _Bad(("every",), f"places no layer in a stack of {n_layers}", self.every,
                           f"1..{n_layers}")
            return list(range(self.every, n_layers + 1, self.every))
        if self.count > n_layers:
            raise _Bad(("count",), f"count {self.count} exceeds n_layers {n_layers}", self.count,
                       f"1..{n_layers}")
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


class Layers(_Section):
    default: Literal["attention", "mamba", "linear", "gla"] | None = None
    pattern: str | None = Field(None, max_length=MAX_LAYERS, description=(
        "letters A (attention), M (mamba), L (linear), G (gla), repeated to n_layers"))
    attention: Placement | None = None
    mamba: Placement | None = None
    linear: Placement | None = None
    gla: Placement | None = None

    @model_validator(mode="after")
    def _one_way(self):
        placed = [m for m in MIXERS if getattr(self, m) is not None]
        letters = "A (attention), M (mamba), L (linear), G (gla)"
        if self.pattern is not None:
            if self.default is not None or placed:
                raise _Bad(("pattern",), "cannot be combined with default or per-mixer entries",
                           allowed="pattern alone, or default plus per-mixer entries")
            if not self.pattern:
                raise _Bad(("pattern",), "is empty", self.pattern, f"letters {letters}")
            bad = sorted(set(self.pattern) - set(PATTERN_LETTERS))
            if bad:
                raise _Bad(("pattern",), f"unknown letter {bad[0]!r}", self.pattern, letters)
        elif self.default is None and not placed:
            raise _Bad((), "no mixer given",
                       allowed="default (plus optional per-mixer entries) or pattern")
        return self


class AttentionCfg(_Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    n_kv_heads: int | None = Field(None, ge=1, le=MAX_HEADS)
    head_dim: int | None = Field(None, ge=1, le=MAX_HEAD_DIM)
    # Below 1 the rotary frequencies would rise with the dimension instead of falling.
    rope_theta: float = Field(10000.0, ge=1.0, le=1e12, allow_inf_nan=False)


class MambaCfg(_Section):
    d_state: int = Field(16, ge=1, le=MAX_STATE)
    expand: int = Field(2, ge=1, le=MAX_EXPAND)
    d_conv: int = Field(4, ge=1, le=MAX_CONV)
    head_dim: int = Field(64, ge=1, le=MAX_HEAD_DIM)


class LinearCfg(_Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    feature_map: Literal["elu1", "relu"] = "elu1"
    feature_dim: int | None = Field(None, ge=1, le=MAX_FEATURES)
    eps: float = Field(1e-6, allow_inf_nan=False, **EPS_RANGE)

    @field_validator("feature_map", mode="before")
    @classmethod
    def _positive(cls, v):
        # o = φ(q)·S / max(φ(q)·z, eps): with φ ≥ 0 the ratio is a weighted mean of values; an
        # identity φ lets φ(q)·z reach zero or below, where the output is divided by eps.
        if v == "identity":
            raise _Bad((), "identity can make the normaliser φ(q)·z zero or negative", v,
                       "elu1, relu (non-negative feature maps)")
        return v


class GlaCfg(_Section):
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    head_dim: int | None = Field(None, ge=1, le=MAX_HEAD_DIM)
    # log gate = logsigmoid(x) / normalizer: 1 is a plain logsigmoid gate, 16 the usual choice.
    gate_logit_normalizer: float = Field(16.0, ge=1.0, le=1024.0, allow_inf_nan=False)


class MlpCfg(_Section):
    hidden_ratio: float = Field(4, gt=0, le=MAX_RATIO, allow_inf_nan=False)


class MoeCfg(_Section):
    n_experts: int = Field(ge=1, le=MAX_EXPERTS)
    top_k: int = Field(2, ge=1, le=MAX_EXPERTS)
    hidden_ratio: float = Field(4, gt=0, le=MAX_RATIO, allow_inf_nan=False)

    @model_validator(mode="after")
    def _k(self):
        if self.top_k > self.n_experts:
            raise _Bad(("top_k",), f"exceeds n_experts {self.n_experts}", self.top_k,
                       f"1..{self.n_experts}")
        return self


SECTIONS = {"attention": AttentionCfg, "mamba": MambaCfg, "linear": LinearCfg, "gla": GlaCfg}
# A mixer section may be left out only where the recipe contract gives it defaults.
DEFAULT_SECTIONS = {"mamba": MambaCfg}


class Recipe(_Section):
    name: str = Field(min_length=1, max_length=MAX_NAME,
                      description=f"1 to {MAX_NAME} printable characters")
    d_model: int = Field(ge=1, le=MAX_WIDTH)
    n_layers: int = Field(ge=1, le=MAX_LAYERS)
    vocab_size: int = Field(ge=1, le=MAX_VOCAB)
    block_size: int = Field(1, ge=1, le=MAX_BLOCK)
    dtype: DType = "bf16"
    state_dtype: DType = "fp32"
    norm_eps: float = Field(1e-5, allow_inf_nan=False, **EPS_RANGE)
    layers: Layers
    attention: AttentionCfg | None = None
    mamba: MambaCfg | None = None
    linear: LinearCfg | None = None
    gla: GlaCfg | None = None
    mlp: MlpCfg | None = None
    moe: MoeCfg | None = None

    @field_validator("name")
    @classmethod
    def _printable(cls, v: str) -> str:
        if not v.isprintable():
            raise _Bad((), "has a control character (newline, tab, escape, ...)", v,
                       f"1 to {MAX_NAME} printable characters")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        if self.mlp is not None and self.moe is not None:
            raise _Bad(("moe",), "given beside mlp", allowed="mlp or moe, not both")
        plan = set(self._resolve_plan())
        for kind, cls in SECTIONS.items():
            if getattr(self, kind) is None and kind in plan:
                if kind not in DEFAULT_SECTIONS:
                    need = ", ".join(k for k, f in cls.model_fields.items() if f.is_required())
                    raise _Bad((kind,), f"layers use {kind} but the recipe has no {kind} section",
                               allowed=f"{kind} section with at least {need}")
                object.__setattr__(self, kind, DEFAULT_SECTIONS[kind]())
            if getattr(self, kind) is not None and kind not in plan:
                raise _Bad((kind,), f"section given but no layer uses {kind}",
                           allowed=f"no {kind} section, or {kind} layers under layers")
        d = self.d_model
        if self.attention is not None:
            a = self.attention
            kv = a.n_kv_heads or a.n_heads
            if a.n_heads % kv:
                raise _Bad(("attention", "n_heads"), f"not a multiple of n_kv_heads {kv}",
                           a.n_heads, "a multiple of n_kv_heads")
            if a.head_dim is None and d % a.n_heads:
                raise _Bad(("attention", "n_heads"), f"does not divide d_model {d}", a.n_heads,
                           "a divisor of d_model, or an explicit head_dim")
            head_dim = a.head_dim or d // a.n_heads
            if head_dim % 2:  # RoPE rotates pairs of dimensions
                field = "head_dim" if a.head_dim else "n_heads"
                raise _Bad(("attention", field), f"makes head_dim {head_dim} odd; RoPE rotates "
                           "pairs of dimensions", getattr(a, field), "an even head_dim")
        if self.mamba is not None and (self.mamba.expand * d) % self.mamba.head_dim:
            raise _Bad(("mamba", "head_dim"), f"does not divide d_inner {self.mamba.expand * d} "
                       "(expand × d_model)", self.mamba.head_dim, "a divisor of expand × d_model")
        for kind in ("linear", "gla"):
            cfg = getattr(self, kind)
            if cfg is not None and getattr(cfg, "head_dim", None) is None and d % cfg.n_heads:
                raise _Bad((kind, "n_heads"), f"does not divide d_model {d}", cfg.n_heads,
                           "a divisor of d_model" if kind == "linear"
                           else "a divisor of d_model, or an explicit head_dim")
        ffn = "moe" if self.moe is not None else "mlp"
        ratio = (self.moe if self.moe is not None else self.mlp_cfg).hidden_ratio
        if int(ratio * d) < 1:
            raise _Bad((ffn, "hidden_ratio"), f"makes the FFN width int(hidden_ratio × d_model {d}) "
                       "zero", ratio, f"at least 1/{d}")
        return self

    # -- derived -------------------------------------------------------------------------------
    def _resolve_plan(self) -> list[str]:
        lay, n = self.layers, self.n_layers
        if lay.pattern is not None:
            p = lay.pattern
            if n % len(p):
                raise _Bad(("layers", "pattern"), f"pattern length {len(p)} does not divide "
                           f"n_layers {n}", p, f"a pattern whose length divides {n}")
            return [PATTERN_LETTERS[c] for c in p * (n // len(p))]
        plan: list[str | None] = [lay.default] * n
        owner: dict[int, str] = {}
        for kind in MIXERS:
            placement = getattr(lay, kind)
            if placement is None:
                continue
            try:
                positions = placement.resolve(n)
            except _Bad as e:
                raise e.under("layers", kind) from None
            for p in positions:
                if p in owner:
                    raise _Bad(("layers", kind), f"layer {p} is claimed by both {owner[p]} and "
                               f"{kind}", allowed="each layer placed once")
                owner[p] = kind
                plan[p - 1] = kind
        if None in plan:
            raise _Bad(("layers", "default"), f"layer {plan.index(None) + 1} has no mixer",
                       allowed=", ".join(MIXERS))
        return plan

    @property
    def layer_plan(self) -> list[str]:
        """Mixer name of each layer, layer 1 first."""
        return self._resolve_plan()

    @property
    def layer_counts(self) -> dict[str, int]:
        """Layers of each mixer kind, kinds in order of first appearance."""
        plan = self.layer_plan
        return {kind: plan.count(kind) for kind in dict.fromkeys(plan)}

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
        suffix = f"@d{d_model}"
        data["name"] = self.name[: MAX_NAME - len(suffix)] + suffix
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


# -- error messages ------------------------------------------------------------------------------
_PROBLEMS = {
    "int_type": "expected an integer", "float_type": "expected a number",
    "finite_number": "expected a finite number", "string_type": "expected text",
    "model_type": "expected a mapping", "dict_type": "expected a mapping",
    "list_type": "expected a list", "literal_error": "not an allowed value",
    "missing": "required field is missing", "greater_than_equal": "too small",
    "greater_than": "too small", "less_than_equal": "too large", "less_than": "too large",
    "too_long": "too many entries", "string_too_long": "too long", "string_too_short": "empty",
}


def _at(loc: tuple) -> tuple[type[BaseModel] | None, FieldInfo | None]:
    """The schema section and field at `loc` (list indices stay on their list's field)."""
    model, field = Recipe, None
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return None, None
        field = model.model_fields[part]
        model = next((a for a in _alternatives(field.annotation)
                      if isinstance(a, type) and issubclass(a, BaseModel)), None)
    return model, field


def _alternatives(annotation) -> tuple:
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return typing.get_args(annotation) if union else (annotation,)


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


def _describe(field: FieldInfo | None) -> str:
    """What a field accepts, from its type and bounds (or its description)."""
    if field is None:
        return ""
    if field.description:
        return field.description
    for a in _alternatives(field.annotation):
        if typing.get_origin(a) is Literal:
            return ", ".join(typing.get_args(a))
        if isinstance(a, type) and issubclass(a, BaseModel):
            return "a mapping of " + ", ".join(a.model_fields)
    b = {k: getattr(m, k) for m in field.metadata for k in ("ge", "gt", "le") if hasattr(m, k)}
    if "le" not in b:
        return ""
    kind = "an integer" if int in _alternatives(field.annotation) else "a finite number"
    low = f"from {_num(b['ge'])} to" if "ge" in b else f"above {_num(b['gt'])} up to"
    return f"{kind} {low} {_num(b['le'])}"


def _message(source: str, loc: tuple, problem: str, got: object = ..., allowed: str = "") -> str:
    where = ".".join(one_line(str(p), MAX_SHOWN) for p in loc)
    text = f"{source}: {where}: {problem}" if where else f"{source}: {problem}"
    if got is not ...:
        text += f" (got {show(got)})"
    return one_line(f"{text}; allowed: {allowed}" if allowed else text)


def _format_error(source: str, err: ValidationError) -> str:
    # An unknown key first: a misspelt key also reports its correct spelling as missing.
    e = min(err.errors(include_url=False),
            key=lambda e: e["type"] not in ("extra_forbidden", "invalid_key"))
    loc = tuple(e["loc"])
    bad = (e.get("ctx") or {}).get("error")
    if isinstance(bad, _Bad):
        where = loc + bad.field
        return _message(source, where, bad.problem, bad.got, bad.allowed or _describe(_at(where)[1]))
    if e["type"] in ("extra_forbidden", "invalid_key"):
        model = _at(loc[:-1])[0]
        allowed = list(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        home = [k for k, cls in SECTIONS.items() if model is Recipe and loc[-1] in cls.model_fields]
        problem = ("unknown key" + (f" (did you mean {close[0]}?)" if close else "")
                   + (f" (it belongs in {' or '.join(home)})" if home else ""))
        return _message(source, loc, problem, allowed=", ".join(allowed))
    problem = _PROBLEMS.get(e["type"]) or e["msg"].removeprefix("Value error, ")
    got = ... if e["type"] == "missing" else e.get("input")
    if e["type"] in ("too_long", "string_too_long"):
        problem += f" ({len(got)} {'characters' if isinstance(got, str) else 'entries'})"
    return _message(source, loc, problem, got, _describe(_at(loc)[1]))


def parse_recipe(data: object, source: str = "<recipe>") -> Recipe:
    """Validate already-parsed YAML/JSON data."""
    source = source_name(source)
    if data is None:
        raise RecipeError(f"{source}: file is empty; a recipe needs name, d_model, n_layers, ...")
    if not isinstance(data, dict):
        raise RecipeError(f"{source}: expected a mapping of recipe fields (got "
                          f"{type(data).__name__}); allowed: {', '.join(Recipe.model_fields)}")
    try:
        return Recipe.model_validate(data)
    except ValidationError as err:
        raise RecipeError(_format_error(source, err)) from None
    except RecursionError:
        raise RecipeError(f"{source}: nested too deeply") from None


def shipped_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "recipes"


def resolve_path(ref: str | Path) -> Path:
    """A recipe path, or the name of a shipped recipe (``tiny_hybrid``)."""
    p = Path(ref)
    try:
        if p.exists():
            return p
        shipped = shipped_dir() / f"{ref}.yaml"
        if not p.suffix and shipped.exists():
            return shipped
    except (OSError, ValueError):  # a name too long for the OS, or with a NUL byte
        pass
    raise RecipeError(f"{source_name(ref)}: no such recipe file (and no shipped recipe of that "
                      "name; see `fsc recipes`)")


def load_recipe(ref: str | Path) -> Recipe:
    path = resolve_path(ref)
    return parse_recipe(parse_yaml(read_text(path), str(path)), str(path))


def shipped_recipes() -> dict[str, Path]:
    return {p.stem: p for p in sorted(shipped_dir().glob("*.yaml"))}
