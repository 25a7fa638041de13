"""Reading a published config.json: typed look-ups that refuse with one line, and the facts
every family shares (dtype, vocabulary, tied embeddings, the name)."""

from __future__ import annotations

import re
from pathlib import Path

from fsc.errors import ImportRefused
from fsc.sections import MAX_NAME

DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
# mamba_ssm's configs (state-spaces' Mamba-2 checkpoints) name no architecture; these keys do
MAMBA_SSM_KEYS = ("d_model", "n_layer", "ssm_cfg")


class Config:
    """A config.json (a dict) and where it came from, for messages."""

    def __init__(self, data: dict, source: str):
        self.data, self.source = data, source

    @property
    def architecture(self) -> str:
        archs = self.data.get("architectures") or []
        if not archs and all(k in self.data for k in MAMBA_SSM_KEYS):
            return "MambaLMHeadModel"
        return str(archs[0]) if archs else str(self.data.get("model_type", "unknown"))

    def refuse(self, feature: str, detail: str = "") -> ImportRefused:
        tail = f" ({detail})" if detail else ""
        return ImportRefused(f"{self.source}: {self.architecture}: {feature} is not supported by "
                             f"fsc{tail}; nothing was imported")

    def get(self, key: str, default=None):
        return self.data.get(key, default)

    def _given(self, key: str, default) -> None:
        """Refused, naming `key`, when the config leaves out a key with no default."""
        if default is None and key not in self.data:
            raise ImportRefused(f"{self.source}: config.json: {self.architecture} needs "
                                f"'{key}' (nothing was imported)")

    def int(self, key: str, default: int | None = None) -> int:
        self._given(key, default)
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ImportRefused(f"{self.source}: config.json: {key} must be an integer "
                                f"(got {value!r})")
        return value

    def float(self, key: str, default: float | None = None) -> float:
        self._given(key, default)
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ImportRefused(f"{self.source}: config.json: {key} must be a number "
                                f"(got {value!r})")
        return float(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise ImportRefused(f"{self.source}: config.json: {key} must be true or false "
                                f"(got {value!r})")
        return value

    def need(self, key: str, allowed, feature: str | None = None, default=None):
        """The value of `key`, refused unless it is one of `allowed`."""
        value = self.get(key, default)
        if value not in allowed:
            raise self.refuse(feature or f"{key} {value!r}",
                              "fsc supports " + " or ".join(repr(a) for a in allowed))
        return value

    # -- shared facts ---------------------------------------------------------------------------
    def dtype(self) -> str:
        """The dtype the weights were published in (bf16 when the config does not say)."""
        name = self.get("dtype") or self.get("torch_dtype") or "bfloat16"
        if name not in DTYPES:
            raise self.refuse(f"dtype {name!r}", "fsc supports " + ", ".join(DTYPES))
        return DTYPES[name]

    def common(self, name: str, tie_default: bool) -> dict:
        """The recipe fields every family fills the same way (G = 1: a causal LM)."""
        out = {"name": name, "d_model": self.int("hidden_size"),
               "n_layers": self.int("num_hidden_layers"), "vocab_size": self.int("vocab_size"),
               "block_size": 1, "dtype": self.dtype(), "state_dtype": "fp32"}
        if self.bool("tie_word_embeddings", tie_default):
            out["tie_embeddings"] = True
        return out


def recipe_name(source: str) -> str:
    """A recipe name from a source: its repository's name (``hf:Qwen/Qwen3-8B@main`` ->
    ``Qwen3-8B``) or its folder's, `.` and `..` resolved (``.`` in ``~/Qwen3-8B`` too)."""
    if source.startswith("hf:"):
        tail = source.removeprefix("hf:").split("@")[0].rstrip("/").split("/")[-1]
    else:
        tail = Path(source).resolve().name
    return file_stem(tail or "imported")[:MAX_NAME]


def file_stem(name: str) -> str:
    """`name` with every character but letters, digits and ._+- replaced by _, less leading
    dots: a file name that stays in its folder, not hidden (``../x`` -> ``_x``)."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", name).lstrip(".") or "imported"
