"""Recipes: the schema, YAML → validated `Recipe` → layer plan and content hash.

The schema is strict: unknown keys, booleans or text where a number belongs, non-finite numbers,
sizes beyond any real model (the bounds below, listed in docs/models.md) and sections that place
or configure nothing are refused. `load_recipe` raises `RecipeError` with one line:
``<file>: <field.path>: <problem> (got <value>); allowed: <what is>``. Finding and reading the
file is fsc.recipe_yaml's; wording a validation error, fsc.recipe_errors'.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, create_model, field_validator, model_validator

from fsc.dtypes import DTYPE_BYTES  # noqa: F401 - re-exported
from fsc.errors import RecipeError, UsageError
from fsc.mixers import KIND_OF_LETTER, KINDS, MIXERS
from fsc.recipe_errors import bad_message, format_error
from fsc.recipe_fields import WEIGHT_FREE
from fsc.recipe_yaml import (  # the recipe files' lookup lives there; re-exported here too
    PUBLISHED,  # noqa: F401 - re-exported
    parse_value,
    parse_yaml_lines,
    published_recipes,  # noqa: F401 - re-exported
    read_text,
    resolve_path,
    shipped_dir,  # noqa: F401 - re-exported
    shipped_recipes,  # noqa: F401 - re-exported
    show,
    source_name,
)
from fsc.sections import (
    ADDED,
    EPS_RANGE,
    MAX_BLOCK,
    MAX_EXPERTS,
    MAX_LAYERS,
    MAX_NAME,
    MAX_RATIO,
    MAX_VOCAB,
    MAX_WIDTH,
    Bad,
    Section,
)
from fsc.text import counted

DType = Literal["bf16", "fp16", "fp32"]


class Placement(Section):
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
            raise Bad((), "no placement given", allowed=ways)
        if self.every is not None and len(given) > 1:
            raise Bad(("every",), "cannot be combined with positions or count", allowed=ways)
        if self.positions is not None:
            if not self.positions:
                raise Bad(("positions",), "is empty: it places no layer", self.positions,
                           "at least one layer number")
            twice = next((p for p, n in Counter(self.positions).items() if n > 1), None)
            if twice is not None:
                raise Bad(("positions",), f"layer {twice} is listed twice", self.positions)
            if self.count is not None and self.count != len(self.positions):
                raise Bad(("count",), f"positions lists {counted(len(self.positions), 'layer')} "
                           f"but count is {self.count}", self.count,
                           "the number of positions, or no count")
            if self.placement is not None:
                raise Bad(("placement",), "applies to count, not to explicit positions",
                          self.placement, "placement beside count, without positions")
        if self.placement is not None and self.count is None:
            raise Bad(("placement",), "needs count", self.placement,
                      "placement beside count, not beside every or positions")
        return self

    def resolve(self, n_layers: int) -> list[int]:
        """1-based layer positions for a stack of `n_layers`; never empty."""
        if self.positions is not None:
            bad = [p for p in self.positions if not 1 <= p <= n_layers]
            if bad:
                raise Bad(("positions",), f"position {bad[0]} is outside 1..{n_layers}",
                           self.positions, f"layer numbers 1..{n_layers}")
            return sorted(self.positions)
        if self.every is not None:
            if self.every > n_layers:
                raise Bad(("every",), f"places no layer in a stack of {n_layers}", self.every,
                           f"1..{n_layers}")
            return list(range(self.every, n_layers + 1, self.every))
        if self.count > n_layers:
            raise Bad(("count",), f"count {self.count} exceeds n_layers {n_layers}", self.count,
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


_LETTERS = ", ".join(f"{s.letter} ({s.kind})" for s in MIXERS.values())


class _Layers(Section):
    """Which mixer each layer uses: `default` plus one Placement per other kind (fields added
    from the registry below), or `pattern`."""

    default: Literal[KINDS] | None = None
    pattern: str | None = Field(None, max_length=MAX_LAYERS, description=(
        f"letters {_LETTERS}, repeated to n_layers"))

    @field_validator("pattern", mode="before")
    @classmethod
    def _not_a_number(cls, value):
        """A pattern YAML read as a number (1e3, 12): said as such, not as `expected text`."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise Bad((), "a number, not mixer letters (YAML reads 1e3 or 12 as one)", value,
                      f"letters {_LETTERS}, one per layer, repeated to n_layers")
        return value

    @model_validator(mode="after")
    def _one_way(self):
        placed = [m for m in KINDS if getattr(self, m) is not None]
        if self.pattern is not None:
            if self.default is not None or placed:
                raise Bad(("pattern",), "cannot be combined with default or per-mixer entries",
                           allowed="pattern alone, or default plus per-mixer entries")
            if not self.pattern:
                raise Bad(("pattern",), "is empty", self.pattern, f"letters {_LETTERS}")
            bad = sorted(set(self.pattern) - set(KIND_OF_LETTER))
            if bad:
                upper, bare = self.pattern.upper(), "".join(self.pattern.split())
                hint = ("" if set(upper) - set(KIND_OF_LETTER)
                        else f" (letters are upper case: {upper})")
                if bare and not set(bare) - set(KIND_OF_LETTER):  # as fsc build prints it
                    hint = f" (write the letters without spaces: {bare})"
                elif any(c.isdigit() for c in bad):
                    spelt = _spelt(self.pattern)
                    hint = (" (one letter per layer, no counts"
                            + (f": write {spelt})" if spelt else ")"))
                raise Bad(("pattern",), f"unknown letter {bad[0]!r}{hint}", self.pattern, _LETTERS)
        elif self.default is None and not placed:
            raise Bad((), "no mixer given",
                       allowed="default (plus optional per-mixer entries) or pattern")
        return self


def _spelt(pattern: str) -> str | None:
    """A pattern written with counts (3M1A) spelt a letter per layer (MMMA); None when it is
    not of that form or spells more than MAX_LAYERS layers."""
    runs = re.findall(r"(\d*)([A-Z])", pattern)
    if "".join(n + c for n, c in runs) != pattern:
        return None
    counts = [(int(n) if n else 1, c) for n, c in runs]
    if sum(n for n, _ in counts) > MAX_LAYERS or not all(c in KIND_OF_LETTER for _, c in counts):
        return None
    return "".join(c * n for n, c in counts)


# The kinds whose section and placement were hashed, as null when absent, when recipes were
# first hashed. A kind registered after them is left out of the hash while absent (ADDED), so
# that adding a mixer keeps every recipe's hash, and the rows the store keys by it.
HASHED_KINDS = ("attention", "mamba", "linear", "gla", "gated_delta")


def kind_field(kind: str, annotation) -> tuple:
    """A kind's optional field of the recipe (its section) or of `layers` (its placement)."""
    return (annotation | None,
            Field(None, json_schema_extra=None if kind in HASHED_KINDS else ADDED))


Layers = create_model("Layers", __base__=_Layers,
                      **{kind: kind_field(kind, Placement) for kind in KINDS})


class MlpCfg(Section):
    """The dense FFN: GELU (up, down) or SwiGLU (gate, up, down: down(silu(gate x) · up x)), of
    width int(hidden_ratio × d_model) or, for published models whose width is no ratio, `hidden`.
    `none`: no FFN at all (a Mamba-2 stack's layers are norm → mixer only)."""

    kind: Literal["gelu", "swiglu", "none"] = Field("gelu", json_schema_extra=ADDED)
    hidden_ratio: float = Field(4, gt=0, le=MAX_RATIO, allow_inf_nan=False)
    hidden: int | None = Field(None, ge=1, le=MAX_WIDTH * MAX_RATIO, json_schema_extra=ADDED)

    @model_validator(mode="after")
    def _one_width(self):
        if self.hidden is not None and "hidden_ratio" in self.model_fields_set:
            raise Bad(("hidden",), "given beside hidden_ratio", self.hidden,
                      "hidden or hidden_ratio, not both")
        if self.kind == "none" and self.model_fields_set & {"hidden", "hidden_ratio"}:
            raise Bad(("kind",), "none has no width", self.kind,
                      "kind none without hidden or hidden_ratio")
        return self

    def hashed_fields(self) -> dict:
        out = super().hashed_fields()
        if self.hidden is not None or self.kind == "none":  # no ratio in use
            del out["hidden_ratio"]
        return out

    def width(self, d_model: int) -> int:
        """The FFN's hidden width (0 for kind none)."""
        if self.kind == "none":
            return 0
        return self.hidden if self.hidden is not None else int(self.hidden_ratio * d_model)


class MoeCfg(Section):
    """Top-k of n_experts experts per token, their gate weights the softmax over the chosen k
    router logits. Experts are GELU (up, down) or SwiGLU (gate, up, down) of width
    int(hidden_ratio × d_model) or `hidden`. With `shared_hidden`, every token also runs one
    shared expert of that width (the same kind), its output scaled by sigmoid(w·x), one gate
    per token, when `shared_gate` (Qwen3-Next)."""

    n_experts: int = Field(ge=1, le=MAX_EXPERTS)
    top_k: int = Field(2, ge=1, le=MAX_EXPERTS)
    hidden_ratio: float = Field(4, gt=0, le=MAX_RATIO, allow_inf_nan=False)
    kind: Literal["gelu", "swiglu"] = Field("gelu", json_schema_extra=ADDED)
    hidden: int | None = Field(None, ge=1, le=MAX_WIDTH * MAX_RATIO, json_schema_extra=ADDED)
    shared_hidden: int | None = Field(None, ge=1, le=MAX_WIDTH * MAX_RATIO,
                                      json_schema_extra=ADDED)
    shared_gate: bool = Field(False, json_schema_extra=ADDED)

    @model_validator(mode="after")
    def _k(self):
        if self.top_k > self.n_experts:
            raise Bad(("top_k",), f"exceeds n_experts {self.n_experts}", self.top_k,
                       f"1..{self.n_experts}")
        if self.hidden is not None and "hidden_ratio" in self.model_fields_set:
            raise Bad(("hidden",), "given beside hidden_ratio", self.hidden,
                      "hidden or hidden_ratio, not both")
        if self.shared_gate and self.shared_hidden is None:
            raise Bad(("shared_gate",), "gates no shared expert", self.shared_gate,
                      "shared_gate with shared_hidden")
        return self

    def hashed_fields(self) -> dict:
        out = super().hashed_fields()
        if self.hidden is not None:  # no ratio in use
            del out["hidden_ratio"]
        return out

    def width(self, d_model: int) -> int:
        """Each routed expert's hidden width."""
        return self.hidden if self.hidden is not None else int(self.hidden_ratio * d_model)


class _Recipe(Section):
    """The recipe's own fields; `Recipe` below adds a section per mixer kind, then mlp, moe."""

    name: str = Field(min_length=1, max_length=MAX_NAME,
                      description=f"1 to {MAX_NAME} printable characters")
    d_model: int = Field(ge=1, le=MAX_WIDTH)
    n_layers: int = Field(ge=1, le=MAX_LAYERS)
    vocab_size: int = Field(ge=1, le=MAX_VOCAB)
    block_size: int = Field(1, ge=1, le=MAX_BLOCK)
    dtype: DType = "bf16"
    state_dtype: DType = "fp32"
    norm_eps: float = Field(1e-5, allow_inf_nan=False, **EPS_RANGE)
    # The head reads the embedding matrix (one [vocab_size, d_model] matrix, not two).
    tie_embeddings: bool = Field(False, json_schema_extra=ADDED)
    # Zero-centred norms (Qwen3-Next): RMSNorm weights stored as their offset from 1, y·(1 + w),
    # initialised to 0. The layer norms, the final norm and attention's qk-norm; the mixers'
    # gated output norms keep y·w.
    norm_offset: bool = Field(False, json_schema_extra=ADDED)
    # Dream's logit shift (G > 1): position j's logits are read from the final hidden state
    # of position j - 1, as an autoregressive model's are, so that a denoiser adapted from one
    # keeps what its head learned (fsc.model.lm.LM documents the rule at a block's first
    # position).
    logit_shift: bool = Field(False, json_schema_extra=ADDED)
    layers: Layers

    @field_validator("name")
    @classmethod
    def _printable(cls, v: str) -> str:
        if not v.isprintable():
            raise Bad((), "has a control character (newline, tab, escape, ...)", v,
                       f"1 to {MAX_NAME} printable characters")
        if not v.strip():
            raise Bad((), "is blank", v, f"1 to {MAX_NAME} printable characters, not all spaces")
        return v

    @model_validator(mode="after")
    def _consistent(self):
        if self.mlp is not None and self.moe is not None:
            raise Bad(("moe",), "given beside mlp", allowed="mlp or moe, not both")
        if self.logit_shift and self.block_size == 1:
            raise Bad(("logit_shift",), "needs block_size > 1: at G = 1 each position already "
                       "predicts the next token", True, "false, or block_size 2 or more")
        plan = set(self._resolve_plan())
        d = self.d_model
        for kind, spec in MIXERS.items():
            if getattr(self, kind) is None and kind in plan:
                if not spec.section_optional:
                    need = ", ".join(k for k, f in spec.section.model_fields.items()
                                     if f.is_required())
                    raise Bad((kind,), f"layers use {kind} but the recipe has no {kind} section",
                               allowed=f"{kind} section with at least {need}")
                object.__setattr__(self, kind, spec.section())
            cfg = getattr(self, kind)
            if cfg is not None and kind not in plan:
                raise Bad((kind,), f"section given but no layer uses {kind}",
                           allowed=f"no {kind} section, or {kind} layers under layers")
            if cfg is not None and spec.check is not None:
                spec.check(cfg, d)
        ffn = "moe" if self.moe is not None else "mlp"
        ffn_cfg = self.moe if self.moe is not None else self.mlp_cfg
        ratio = ffn_cfg.hidden_ratio
        by_ratio = ffn_cfg.hidden is None and (self.moe is not None or ffn_cfg.kind != "none")
        if by_ratio and int(ratio * d) < 1:
            raise Bad((ffn, "hidden_ratio"), f"makes the FFN width int(hidden_ratio × d_model {d}) "
                       "zero", ratio, f"at least 1/{d}")
        return self

    # -- derived -------------------------------------------------------------------------------
    def _resolve_plan(self) -> list[str]:
        lay, n = self.layers, self.n_layers
        if lay.pattern is not None:
            p = lay.pattern
            if n % len(p):
                raise Bad(("layers", "pattern"), f"pattern length {len(p)} does not divide "
                           f"n_layers {n}", p, f"a pattern whose length divides {n}")
            return [KIND_OF_LETTER[c] for c in p * (n // len(p))]
        plan: list[str | None] = [lay.default] * n
        owner: dict[int, str] = {}
        for kind in KINDS:
            placement = getattr(lay, kind)
            if placement is None:
                continue
            try:
                positions = placement.resolve(n)
            except Bad as e:
                raise e.under("layers", kind) from None
            for p in positions:
                if p in owner:
                    raise Bad(("layers", kind), f"layer {p} is claimed by both {owner[p]} and "
                               f"{kind}", allowed="each layer placed once")
                owner[p] = kind
                plan[p - 1] = kind
        if None in plan:
            raise Bad(("layers", "default"), f"layer {plan.index(None) + 1} has no mixer",
                       allowed=", ".join(KINDS))
        return plan

    @property
    def layer_plan(self) -> list[str]:
        """Mixer name of each layer, layer 1 first."""
        return self._resolve_plan()

    def mixer_shape(self, kind: str):
        """What one `kind` layer of this recipe holds and does (its registry entry's
        MixerShape): the cost model asks the recipe, so it imports no schema itself."""
        return MIXERS[kind].shape(self)

    @property
    def layer_counts(self) -> dict[str, int]:
        """Layers of each mixer kind, kinds in order of first appearance."""
        plan = self.layer_plan
        return {kind: plan.count(kind) for kind in dict.fromkeys(plan)}

    @property
    def layer_map(self) -> str:
        """Pattern letters in groups of four, e.g. ``MMMA MMMA``."""
        s = "".join(MIXERS[k].letter for k in self.layer_plan)
        return " ".join(s[i : i + 4] for i in range(0, len(s), 4))

    @property
    def recipe_hash(self) -> str:
        """Content hash of the validated recipe (comments and key order do not matter)."""
        canon = json.dumps(self.hashed_fields(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode()).hexdigest()[:16]

    @property
    def position_encoding(self) -> str | None:
        """How the attention layers encode position (None without attention layers)."""
        if "attention" not in self.layer_plan:
            return None
        a = self.attention
        encoding = f"RoPE, theta {a.rope_theta:g}" if a.position == "rope" else "none (NoPE)"
        if a.position == "rope" and a.rope_dims is not None:
            encoding += f", on {a.rope_dims} of each head's {a.head_dim or self.d_model // a.n_heads} dims"
        scaling = a.rope_scaling if a.position == "rope" else None
        if scaling is not None:
            encoding += f", {scaling.kind} scaling ×{scaling.factor:g}" + (
                f" (original context {scaling.original_context:,})"
                if scaling.kind == "llama3" else "")
        if a.window is not None:
            encoding += f"; sliding window of {a.window} tokens"
        if a.logn is not None:
            encoding += f"; queries past {a.logn} scaled by log(p + 1) / log({a.logn})"
        return encoding

    @property
    def uses_state_dtype(self) -> bool:
        """Whether a layer's cache is held in `state_dtype`: a fixed-size state whose mixer
        fixes no dtype of its own (not a K/V cache, a sliding window's ring, linear
        attention's fp32 sums)."""
        shapes = map(self.mixer_shape, dict.fromkeys(self.layer_plan))
        return any(not s.growing and s.cache_dtype is None for s in shapes)

    @property
    def decays_by_position(self) -> bool:
        """Whether a Mamba layer's decay depends on the token's position (`mamba.decay_from`):
        a step then differs from one cache length to the next."""
        return self.mamba is not None and self.mamba.decay_from is not None

    @property
    def mlp_cfg(self) -> MlpCfg | None:
        return None if self.moe is not None else (self.mlp or MlpCfg())

    def to_yaml(self) -> str:
        """The recipe as YAML: every field it sets, none of the options it leaves at their
        defaults (the fields its hash covers)."""
        return yaml.safe_dump(_pruned(self.hashed_fields()), sort_keys=False)

    def as_autoregressive(self) -> Recipe:
        """The same weights read as a causal LM (G = 1, position i predicting token i + 1):
        a shifted denoiser's position i already predicts token i + 1, so the shift goes."""
        return self.model_copy(update={"block_size": 1, "logit_shift": False})

    def with_dtype(self, dtype: str) -> Recipe:
        """The same recipe with weights and activations in `dtype` (bf16, fp16, fp32)."""
        return self if dtype == self.dtype else self.model_copy(update={"dtype": dtype})

    def changed(self, changes: tuple[tuple[str, object], ...]) -> Recipe:
        """The recipe with weight-free fields changed (`parse_changes`'s pairs; `fsc eval
        --set`), named for them so that their rows stand apart: the same weights read another
        way. RecipeError for a value the field does not take, or a section the recipe lacks."""
        if not changes:
            return self
        data = _pruned(self.hashed_fields())
        for key, value in changes:
            *section, field = key.split(".")
            into = data
            for part in section:
                if getattr(self, part, None) is None:
                    raise RecipeError(f"--set {key}: {self.name} has no {part} section")
                into = into.setdefault(part, {})
            if value is None:
                into.pop(field, None)
            else:
                into[field] = value
        said = ",".join(f"{k}={'none' if v is None else v}" for k, v in changes)
        data["name"] = f"{self.name}+{said}"[:MAX_NAME]
        typed = ",".join(f"{k}={'none' if v is None else show(v)}" for k, v in changes)
        changed = parse_recipe(data, f"{self.name} with --set {typed}")
        if any(k == "state_dtype" for k, _ in changes) and not changed.uses_state_dtype:
            raise RecipeError(f"--set state_dtype: no cache of {self.name} is held in "
                              "state_dtype (its caches are in dtype, or in a dtype their mixer "
                              "fixes), so it would change nothing but the rows' name")
        return changed

    def with_width(self, d_model: int, vocab_size: int | None = None) -> Recipe:
        """The same layer plan at another width (heads scaled to keep head sizes valid; explicit
        FFN and expert widths scaled with it)."""
        data = _pruned(self.hashed_fields())
        scale = d_model / self.d_model
        for ffn, key in (("mlp", "hidden"), ("moe", "hidden"), ("moe", "shared_hidden")):
            if key in data.get(ffn, {}):
                data[ffn][key] = max(1, round(data[ffn][key] * scale))
        data["d_model"] = d_model
        suffix = f"@d{d_model}"
        data["name"] = self.name[: MAX_NAME - len(suffix)] + suffix
        if vocab_size is not None:
            data["vocab_size"] = vocab_size
        for kind, spec in MIXERS.items():
            if kind in data and spec.at_width is not None:
                data[kind] = spec.at_width(data[kind], d_model, scale)
        return Recipe.model_validate(data)


Recipe = create_model(
    "Recipe", __base__=_Recipe,
    **{kind: kind_field(kind, spec.section) for kind, spec in MIXERS.items()},
    mlp=(MlpCfg | None, None), moe=(MoeCfg | None, None),
)


def _pruned(fields: dict) -> dict:
    """`fields` without the None values, nested mappings likewise."""
    return {k: _pruned(v) if isinstance(v, dict) else v for k, v in fields.items() if v is not None}



def parse_changes(items) -> tuple[tuple[str, object], ...]:
    """(key, value) pairs of `--set KEY=VALUE` items, each key one of WEIGHT_FREE, the value
    read as a recipe file's values are (`parse_value`; none or null: the field's default);
    UsageError or RecipeError naming the item otherwise."""
    out: dict[str, object] = {}
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not text.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. attention.logn=128")
        if key not in WEIGHT_FREE:
            raise UsageError(f"--set {key}: not a field that changes no weight; one of "
                             f"{', '.join(WEIGHT_FREE)}")
        if key in out:
            raise UsageError(f"--set {key}: given twice")
        value = parse_value(text, f"--set {key}")
        out[key] = None if isinstance(value, str) and value.lower() == "none" else value
    return tuple(out.items())


def parse_recipe(data: object, source: str = "<recipe>",
                 lines: dict[tuple, int] | None = None) -> Recipe:
    """Validate already-parsed YAML/JSON data; `lines` (fsc.recipe_yaml.parse_yaml_lines):
    the line of each key, which an error names."""
    source = source_name(source)
    if data is None:
        raise RecipeError(f"{source}: file is empty (or holds only comments, --- or null); a "
                          "recipe needs name, d_model, n_layers, ...")
    if not isinstance(data, dict):
        raise RecipeError(f"{source}: expected a mapping of recipe fields (got "
                          f"{type(data).__name__}); allowed: {', '.join(Recipe.model_fields)}")
    try:
        return Recipe.model_validate(data)
    except ValidationError as err:
        sections = {**{kind: spec.section for kind, spec in MIXERS.items()},
                    "mlp": MlpCfg, "moe": MoeCfg}
        raise RecipeError(format_error(source, err, Recipe, sections, lines)) from None
    except RecursionError:
        raise RecipeError(f"{source}: nested too deeply") from None


def load_recipe(ref: str | Path) -> Recipe:
    """The recipe at `ref` (a path, or a shipped recipe's name: `resolve_path`), read
    (fsc.recipe_yaml) and validated; RecipeError with one line otherwise."""
    path = resolve_path(ref)
    data, lines = parse_yaml_lines(read_text(path), str(path))
    layers = data.get("layers") if isinstance(data, dict) else None
    empty = next((k for k in KINDS if isinstance(layers, dict) and k in layers
                  and layers[k] is None), None)
    if empty is not None:  # `attention:` and nothing after it, in a file: not a missing entry
        raise RecipeError(bad_message(source_name(path), Bad(
            ("layers", empty), "is empty: no placement given", None,
            f"one of positions, every or count, or no {empty} entry"), lines))
    return parse_recipe(data, str(path), lines)
