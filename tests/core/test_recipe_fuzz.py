"""Generated bad recipes: mutations of the shipped tiny recipes (wrong types, booleans, non-finite
and out-of-range numbers, misspelt and duplicate keys, placements that place nothing, bad names)
and hostile files (deep nesting, alias bombs, FIFOs, devices, binary, oversized). Every one must
raise RecipeError promptly with one capped line that names the field, never a Python error; a
sample goes through the CLI boundary (`fsc build`, `fsc estimate`): exit 2, one line on stderr."""

from __future__ import annotations

import copy
import json
import os
import random
import re
import threading
import time

import pytest
import yaml

from fsc.errors import RecipeError
from fsc.recipe import load_recipe, shipped_recipes
from fsc.recipe_yaml import MAX_MESSAGE

SECONDS = 2.0
BASES = {n: yaml.safe_load(shipped_recipes()[n].read_text())
         for n in ("tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_hybrid")}
HOME = {"attention": "tiny_attn", "mlp": "tiny_attn", "mamba": "tiny_mamba",
        "linear": "tiny_linear", "gla": "tiny_gla", "moe": "tiny_hybrid", "layers": "tiny_hybrid"}


class Raw(str):
    """YAML text written as is (`.inf`, `1e7`, `true`), not as a JSON string."""


def _flow(v) -> str:
    if isinstance(v, Raw):
        return v
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)}: {_flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_flow(x) for x in v) + "]"
    return json.dumps(v)  # JSON is YAML: "a\nb" and "\u001b" arrive as those characters


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z_]\w*", k) else json.dumps(k)


def emit(data: dict) -> str:
    return "".join(f"{_key(k)}: {_flow(v)}\n" for k, v in data.items())


def mutate(field: str, value=None, *, rename: str | None = None, drop: bool = False,
           base: str | None = None) -> str:
    """A shipped tiny recipe (by default the one that uses `field`'s section) with `field` set,
    renamed or dropped."""
    *parents, last = field.split(".")
    data = copy.deepcopy(BASES[base or HOME.get(parents[0] if parents else field, "tiny_attn")])
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    if rename is not None:
        node[rename] = node.pop(last)
    elif drop:
        node.pop(last)
    else:
        node[last] = value
    return emit(data)


# -- the cases: (id, file text | bytes | a function of tmp_path returning a path, expected) ------
CASES: list[tuple[str, object, str]] = []

TOP_INTS = ("d_model", "n_layers", "vocab_size", "block_size")
BAD_INTS = ("true", "false", "2.0", "'8'", "1e7", "-4", "0", "10000000", "[4]", "{a: 1}", ".inf",
            "99999999999999999999999")
CASES += [(f"{f}={v}", mutate(f, Raw(v)), f": {f}: ") for f in TOP_INTS for v in BAD_INTS]

SECTION_INTS = ("attention.n_heads", "attention.n_kv_heads", "attention.head_dim", "mamba.d_state",
                "mamba.expand", "mamba.d_conv", "mamba.head_dim", "linear.n_heads",
                "linear.feature_dim", "gla.n_heads", "gla.head_dim", "moe.n_experts", "moe.top_k")
CASES += [(f"{f}={v}", mutate(f, Raw(v)), f": {f}: ")
          for f in SECTION_INTS for v in ("true", "2.0", "'8'", "0", "10000000")]

FLOATS = ("norm_eps", "attention.rope_theta", "linear.eps", "gla.gate_logit_normalizer",
          "mlp.hidden_ratio", "moe.hidden_ratio")
CASES += [(f"{f}={v}", mutate(f, Raw(v)), f": {f}: ")
          for f in FLOATS for v in (".inf", "-.inf", ".nan", "true", "'x'", "0", "-1", "1e300")]

for field, wrong in (("d_model", "d_modle"), ("n_layers", "n_layer"), ("vocab_size", "vocab"),
                     ("block_size", "blocksize"), ("dtype", "dtyp"), ("attention.n_heads", "n_head"),
                     ("mamba.d_state", "dstate"), ("linear.feature_dim", "feature_dims"),
                     ("gla.head_dim", "headdim"), ("moe.n_experts", "experts"),
                     ("layers.default", "defualt"), ("mlp.hidden_ratio", "hiden_ratio")):
    where = ".".join([*field.split(".")[:-1], wrong])
    CASES.append((f"misspelt-{wrong}", mutate(field, rename=wrong), f": {where}: unknown key"))
CASES += [
    ("extra-n_heads", mutate("n_heads", 4), ": n_heads: unknown key (it belongs in attention"),
    ("extra-bogus", mutate("bogus", 1), ": bogus: unknown key"),
    ("extra-nested", mutate("attention.bogus", 1), ": attention.bogus: unknown key"),
    ("extra-newline-key", mutate("a\nb\x1b[2J", 1), r": a\nb\x1b[2J: unknown key"),
    ("extra-int-key", emit(BASES["tiny_attn"]) + "1: 2\n", ": 1: unknown key"),
]

TINY = emit(BASES["tiny_attn"])
CASES += [
    ("dup-top", TINY + "d_model: 32\n", ": d_model: duplicate key at lines"),
    ("dup-quoted", TINY + '"n_layers": 2\n', ": n_layers: duplicate key at lines"),
    ("dup-flow", TINY.replace("n_heads: 4,", "n_heads: 4, n_heads: 8,"),
     ": attention.n_heads: duplicate key at line"),
    ("dup-block", emit(BASES["tiny_mamba"]).replace("mamba: {", "x: {")
     + "mamba:\n  d_state: 8\n  d_state: 16\n", ": mamba.d_state: duplicate key at lines"),
    ("dup-layers", TINY.replace("default: \"attention\"", "default: attention, default: mamba"),
     ": layers.default: duplicate key"),
]

for name, entry, field in (
        ("every-100", {"every": 100}, "every"), ("positions-empty", {"positions": []}, "positions"),
        ("positions-0", {"positions": [0]}, "positions"), ("positions-5", {"positions": [5]}, "positions"),
        ("positions-twice", {"positions": [4, 4]}, "positions"),
        ("positions-bool", {"positions": [Raw("true")]}, "positions.0"),
        ("positions-2000", {"positions": list(range(1, 2001))}, "positions"),
        ("count-0", {"count": 0}, "count"), ("count-99", {"count": 99}, "count"),
        ("placement-alone", {"placement": "uniform"}, ""), ("every-and-count", {"every": 2, "count": 2}, "every"),
        ("placement-sideways", {"count": 2, "placement": "sideways"}, "placement"),
        ("placement-with-positions", {"positions": [1], "placement": "uniform"}, "placement"),
        ("placement-scalar", Raw("4"), "")):
    CASES.append((f"layers-{name}", mutate("layers.attention", entry),
                  ": layers.attention" + (f".{field}: " if field else ": ")))
for name, layers, field in (
        ("pattern-empty", {"pattern": ""}, "layers.pattern"), ("pattern-MX", {"pattern": "MX"}, "layers.pattern"),
        ("pattern-MMM", {"pattern": "MMM"}, "layers.pattern"),
        ("pattern-and-default", {"pattern": "MA", "default": "mamba"}, "layers.pattern"),
        ("none", {}, "layers"), ("list", Raw("[]"), "layers"),
        ("default-transformer", {"default": "transformer"}, "layers.default"),
        ("claimed-twice", {"default": "mamba", "attention": {"every": 4}, "mamba": {"positions": [4]}},
         "layers.mamba")):
    CASES.append((f"layers-{name}", mutate("layers", layers), f": {field}: "))

for name, value in (("empty", ""), ("129", "x" * 129), ("100k", "x" * 100_000), ("newline", "a\nb"),
                    ("ansi", "\x1b[31mred\x1b[0m"), ("tab", "a\tb"), ("bidi", "\u202eevil"),
                    ("nul", "\x00"), ("list", Raw("[1]")), ("int", Raw("12")), ("bool", Raw("true"))):
    CASES.append((f"name-{name}", mutate("name", value), ": name: "))

CASES += [
    ("unused-gla", mutate("gla", {"n_heads": 4}, base="tiny_attn"), ": gla: section given"),
    ("missing-attention", mutate("attention", drop=True), ": attention: layers use attention"),
    ("mlp-and-moe", mutate("moe", {"n_experts": 4}, base="tiny_attn"), ": moe: given beside mlp"),
    ("identity", mutate("linear.feature_map", "identity"), ": linear.feature_map: identity"),
    ("feature-tanh", mutate("linear.feature_map", "tanh"), ": linear.feature_map: "),
    ("mamba-scalar", mutate("mamba", Raw("5")), ": mamba: expected a mapping"),
    ("mamba-list", mutate("mamba", Raw("[1, 2]")), ": mamba: expected a mapping"),
    ("head-dim-odd", mutate("attention.head_dim", 7), ": attention.head_dim: "),
    ("position-alibi", mutate("attention.position", "alibi"), ": attention.position: "),
    ("position-bool", mutate("attention.position", Raw("false")), ": attention.position: "),
    ("position-null", mutate("attention.position", Raw("null")), ": attention.position: "),
    ("position-list", mutate("attention.position", Raw("[rope]")), ": attention.position: "),
    ("window-zero", mutate("attention.window", 0), ": attention.window: "),
    ("window-negative", mutate("attention.window", -8), ": attention.window: "),
    ("window-huge", mutate("attention.window", 2**25), ": attention.window: "),
    ("window-text", mutate("attention.window", "wide"), ": attention.window: "),
    ("window-bool", mutate("attention.window", Raw("true")), ": attention.window: "),
    ("heads-not-multiple", mutate("attention.n_kv_heads", 3), ": attention.n_heads: "),
    ("mamba-head-dim", mutate("mamba.head_dim", 48), ": mamba.head_dim: "),
    ("gla-heads", mutate("gla.n_heads", 3).replace("head_dim: 16", "x: 1").replace(", x: 1", ""),
     ": gla.n_heads: "),
    ("top-k", mutate("moe.top_k", 5), ": moe.top_k: "),
    ("hidden-zero", mutate("mlp.hidden_ratio", 0.001), ": mlp.hidden_ratio: "),
    ("dtype-int8", mutate("dtype", "int8"), ": dtype: "),
    ("state-dtype-bool", mutate("state_dtype", Raw("true")), ": state_dtype: "),
    ("dtype-list", mutate("dtype", Raw("[fp32]")), ": dtype: "),
]

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi"))


def _fifo(tmp):
    os.mkfifo(tmp / "fifo.yaml")
    return tmp / "fifo.yaml"


def _zero_link(tmp):
    (tmp / "zero.yaml").symlink_to("/dev/zero")
    return tmp / "zero.yaml"


CASES += [
    ("deep-flow", "[" * 20_000, "nested deeper than"),
    ("deep-map", "{a: " * 5_000, "nested deeper than"),
    ("deep-block", "".join("  " * i + f"k{i}:\n" for i in range(100)), "nested deeper than"),
    ("alias-bomb", BOMB, "expands to more than"),
    ("alias-bomb-in-field", BOMB + TINY.replace("layers: {", "layers: {attention: {positions: *i}, "),
     "expands to more than"),
    ("alias-cycle", "a: &a [*a]\n", "an alias refers to a section that contains it"),
    ("alias-chain", "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 60)),
     "nested deeper than"),
    ("fifo", _fifo, "is not a regular file"),
    ("dev-zero", lambda tmp: "/dev/zero", "is not a regular file"),
    ("dev-zero-link", _zero_link, "is not a regular file"),
    ("directory", lambda tmp: tmp, "is a directory"),
    ("binary", random.Random(0).randbytes(4096), "is not UTF-8"),
    ("nul-byte", TINY.replace("tiny_attn", "a\x00b"), "not YAML text"),
    ("empty", "", "file is empty"),
    ("comments-only", "# nothing\n", "file is empty"),
    ("oversized", TINY + "#" * (300 * 1024) + "\n", "is larger than 256 KiB"),
    ("latin-1", TINY.replace("tiny_attn", "caf\u00e9").encode("latin-1"), "is not UTF-8"),
    ("utf-16", TINY.encode("utf-16"), "is not UTF-8"),
    ("top-list", "- 1\n- 2\n", "expected a mapping of recipe fields (got list)"),
    ("top-scalar", "hello\n", "expected a mapping of recipe fields (got str)"),
    ("syntax", TINY.replace("}", "", 1), "YAML syntax error at line"),
    ("tab-indent", "layers:\n\tdefault: mamba\n", "YAML syntax error at line"),
    ("huge-int", TINY.replace("d_model: 64", "d_model: " + "9" * 5000), "cannot be read as int"),
    ("python-tag", "name: !!python/object/apply:os.system [ls]\n", "constructor for the tag"),
    ("bad-timestamp", TINY.replace('"tiny_attn"', "!!timestamp 2001-13-45"),
     "cannot be read as timestamp"),
    ("two-documents", "---\na: 1\n---\nb: 2\n", "expected a single document"),
    ("unhashable-key", "? [a, b]\n: 1\n", "unhashable key"),
    ("missing-file", lambda tmp: tmp / "nope.yaml", "no such recipe file"),
    ("nul-in-path", lambda tmp: f"{tmp}/a\x00b.yaml", "no such recipe file"),
    ("long-path", lambda tmp: "x" * 5000, "no such recipe file"),
]


def _path(tmp, made):
    if callable(made):
        return made(tmp)
    p = tmp / "r.yaml"
    if isinstance(made, bytes):
        p.write_bytes(made)
    else:
        p.write_text(made)
    return p


def _load_promptly(path) -> tuple[BaseException | None, float]:
    """load_recipe(path) in a daemon thread: a hang fails the test instead of stalling it."""
    box: list[BaseException | None] = [None]

    def run():
        try:
            load_recipe(path)
        except BaseException as e:  # noqa: BLE001 (the test inspects whatever was raised)
            box[0] = e

    start = time.monotonic()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(SECONDS * 5)
    assert not t.is_alive(), f"load_recipe({str(path)[:80]!r}) still running after {SECONDS * 5} s"
    return box[0], time.monotonic() - start


PYTHON_ERROR = re.compile(r"Traceback|\b[A-Z]\w*(Error|Exception)\b|Input should|Value error|"
                          r"<unicode string>|object has no attribute")


def _check_message(msg: str, expected: str) -> None:
    assert "\n" not in msg and "\r" not in msg and msg.isprintable(), msg
    assert len(msg) <= MAX_MESSAGE, len(msg)
    assert expected in msg, msg
    assert not PYTHON_ERROR.search(msg), msg


def test_there_are_enough_cases():
    assert len(CASES) >= 100 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("made, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_recipe_is_one_clear_line(tmp_path, made, expected):
    path = _path(tmp_path, made)
    err, seconds = _load_promptly(path)
    assert isinstance(err, RecipeError), repr(err)
    assert seconds < SECONDS, f"{seconds:.2f} s"
    _check_message(str(err), expected)


# Every twelfth case, plus the hostile files, through the CLI boundary in this process.
CLI_CASES = [c for i, c in enumerate(CASES) if i % 12 == 0] + [
    c for c in CASES if c[0] in ("fifo", "dev-zero", "alias-bomb", "deep-flow", "dup-flow",
                                 "name-ansi", "binary", "directory")]


@pytest.mark.parametrize("command", ["build", "estimate"])
@pytest.mark.parametrize("made, expected", [c[1:] for c in CLI_CASES],
                         ids=[c[0] for c in CLI_CASES])
def test_cli_exits_2_with_one_line(tmp_path, capsys, command, made, expected):
    from fsc.cli.main import main

    path = _path(tmp_path, made)
    start = time.monotonic()
    code = main([command, str(path)])
    seconds = time.monotonic() - start
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and out == ""
    assert seconds < SECONDS, f"{seconds:.2f} s"
    _check_message(err.removeprefix("error: ").rstrip("\n"), expected)
