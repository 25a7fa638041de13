import pytest

from fsc.errors import RecipeError
from fsc.recipe import load_recipe, parse_recipe, shipped_recipes

BASE = """name: t
d_model: 64
n_layers: 4
vocab_size: 300
"""


def _write(tmp_path, text, name="r.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _err(tmp_path, text):
    with pytest.raises(RecipeError) as e:
        load_recipe(_write(tmp_path, text))
    msg = str(e.value)
    assert "\n" not in msg and str(tmp_path / "r.yaml") in msg
    return msg


def test_every_shipped_recipe_loads():
    names = set(shipped_recipes())
    assert {"attn_3b", "mamba_3b", "hybrid_3b", "hybrid_24_8", "linear_24_8", "mamba_7b",
            "attn_7b", "tiny_attn", "tiny_mamba", "tiny_linear", "tiny_gla", "tiny_hybrid"} <= names
    for path in shipped_recipes().values():
        r = load_recipe(path)
        assert len(r.layer_plan) == r.n_layers


def test_paper_and_book_recipes_have_the_stated_shapes():
    h = load_recipe("hybrid_3b")
    assert (h.d_model, h.n_layers, h.block_size) == (2560, 28, 32)
    assert h.layer_plan.count("attention") == 5 and h.attention.n_heads == 20
    assert h.attention.head_dim == 128 and h.attention.n_kv_heads == 20
    b = load_recipe("hybrid_24_8")
    assert [i + 1 for i, k in enumerate(b.layer_plan) if k == "attention"] == list(range(4, 33, 4))
    assert b.layer_map == " ".join(["MMMA"] * 8)
    assert b.mamba.d_state == 16 and b.state_dtype == "bf16"
    lin = load_recipe("linear_24_8")
    assert lin.layer_plan.count("linear") == 24 and lin.linear.feature_dim == 128


def test_placements(tmp_path):
    r = load_recipe(_write(tmp_path, BASE.replace("n_layers: 4", "n_layers: 32")
                           + "layers: {default: mamba, attention: {every: 4}}\nattention: {n_heads: 4}\n"))
    assert r.layer_map == " ".join(["MMMA"] * 8)
    r = parse_recipe({"name": "x", "d_model": 64, "n_layers": 28, "vocab_size": 300,
                      "layers": {"default": "mamba", "attention": {"count": 7, "placement": "back_dense"}},
                      "attention": {"n_heads": 4}})
    pos = [i + 1 for i, k in enumerate(r.layer_plan) if k == "attention"]
    assert len(pos) == 7 and sum(p > 14 for p in pos) > sum(p <= 14 for p in pos)
    r = parse_recipe({"name": "x", "d_model": 64, "n_layers": 8, "vocab_size": 300,
                      "layers": {"pattern": "MLGA"}, "attention": {"n_heads": 4},
                      "linear": {"n_heads": 4}, "gla": {"n_heads": 4}})
    assert r.layer_plan == ["mamba", "linear", "gla", "attention"] * 2


def test_hash_ignores_comments_and_key_order(tmp_path):
    a = load_recipe(_write(tmp_path, BASE + "layers: {default: mamba}\n", "a.yaml"))
    b = load_recipe(_write(tmp_path, "# comment\nvocab_size: 300\n" + BASE.replace("vocab_size: 300\n", "")
                           + "layers: {default: mamba}\n", "b.yaml"))
    assert a.recipe_hash == b.recipe_hash


@pytest.mark.parametrize("text, expected", [
    (BASE + "layers: {default: mamba}\nbogus: 1\n", "bogus: unknown key"),
    (BASE + "layers: {default: mamba}\nmamba: {d_stat: 4}\n",
     "mamba.d_stat: unknown key (did you mean d_state?); allowed: d_state, expand, d_conv, head_dim"),
    (BASE + "layers: [default: mamba\n", "YAML syntax error at the end of the file: while "
     "parsing a flow sequence (begun at line 5, column 9)"),  # (not at a line 6 it has not)
    (BASE.replace("d_model: 64", "d_model: sixty") + "layers: {default: mamba}\n", "d_model"),
    (BASE + "layers: {default: mamba, attention: {positions: [2, 5]}}\nattention: {n_heads: 4}\n",
     "position 5 is outside 1..4"),
    (BASE + "layers: {default: mamba, attention: {positions: [1, 2], count: 3}}\nattention: {n_heads: 4}\n",
     "positions lists 2 layers but count is 3"),
    (BASE + "layers: {default: attention}\nattention: {n_heads: 8, n_kv_heads: 3, head_dim: 8}\n",
     "attention.n_heads: not a multiple of n_kv_heads 3 (got 8)"),
    (BASE + "layers: {pattern: MMXA}\n", "unknown letter 'X'"),
    (BASE.replace("d_model: 64", "d_model: -64") + "layers: {default: mamba}\n", "d_model"),
    (BASE + "layers: {default: mamba}\nmamba: {d_state: 0}\n", "mamba.d_state"),
    (BASE + "layers: {default: attention}\n", "no attention section"),
    (BASE + "layers: {default: transformer}\n",
     "layers.default: not an allowed value (got 'transformer'); allowed: attention, mamba, linear, gla"),
    (BASE + "layers: {pattern: MMA}\n", "pattern length 3 does not divide n_layers 4"),
    (BASE + "layers: {default: mamba}\nmlp: {hidden_ratio: 4}\nmoe: {n_experts: 4}\n", "mlp or moe"),
    (BASE + "layers: {default: mamba}\nmoe: {n_experts: 2, top_k: 3}\n", "moe.top_k: exceeds n_experts 2 (got 3); allowed: 1..2"),
    ("", "file is empty"),
    ("- 1\n- 2\n", "expected a mapping"),
    (BASE, "layers: required field is missing"),
])
def test_bad_recipes_are_one_clear_line(tmp_path, text, expected):
    assert expected in _err(tmp_path, text)


def test_missing_file_is_clear(tmp_path):
    with pytest.raises(RecipeError, match="no such recipe file"):
        load_recipe(tmp_path / "nope.yaml")


def test_cli_prints_recipe_errors_without_traceback(tmp_path, fsc_cli):
    bad = _write(tmp_path, BASE + "layers: {default: mamba}\nbogus: 1\n")
    res = fsc_cli("build", bad)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "bogus: unknown key" in res.stderr
    assert len(res.stderr.strip().splitlines()) <= 2


def test_duplicate_keys_name_the_key_and_both_lines(tmp_path):
    msg = _err(tmp_path, BASE + "layers: {default: mamba}\nd_model: 32\n")
    assert "r.yaml: d_model: duplicate key at lines 2 and 6" in msg
    msg = _err(tmp_path, BASE + "layers: {default: attention}\nattention:\n  n_heads: 4\n  n_heads: 8\n")
    assert "attention.n_heads: duplicate key at lines 7 and 8" in msg
    assert "twice" in _err(tmp_path, BASE + "layers: {default: mamba, default: gla}\n")


def test_misspelt_key_is_named_before_the_field_it_leaves_missing(tmp_path):
    msg = _err(tmp_path, BASE.replace("d_model", "d_modle") + "layers: {default: mamba}\n")
    assert "d_modle: unknown key (did you mean d_model?)" in msg and "missing" not in msg
    assert "rope_theta: unknown key (it belongs in attention)" in _err(
        tmp_path, BASE + "rope_theta: 5\nlayers: {default: mamba}\n")


@pytest.mark.parametrize("line, expected", [
    ("d_model: true", "d_model: expected an integer (got true); allowed: an integer from 1 to 65536"),
    ("d_model: 64.0", "d_model: expected an integer (got 64.0)"),
    ("d_model: '64'", "d_model: expected an integer (got '64')"),
    ("n_layers: 1e7", "n_layers: expected an integer (got 10000000.0)"),
    ("n_layers: 10000000", "n_layers: too large (got 10000000); allowed: an integer from 1 to 1024"),
    ("norm_eps: .inf", "norm_eps: expected a finite number (got .inf)"),
    ("norm_eps: true", "norm_eps: expected a number (got true)"),
    ("name: [a]", "name: expected text (got ['a'])"),
    ('name: "a\\nb\\e[31m"', r"name: has a control character (newline, tab, escape, ...) (got 'a\nb\x1b[31m')"),
])
def test_strict_types_and_bounds(tmp_path, line, expected):
    fields = dict(row.split(": ", 1) for row in BASE.splitlines())
    key, value = line.split(": ", 1)
    fields[key] = value
    text = "".join(f"{k}: {v}\n" for k, v in fields.items()) + "layers: {default: mamba}\n"
    assert expected in _err(tmp_path, text)


def test_numbers_and_dates_read_as_yaml_1_2(tmp_path):
    r = load_recipe(_write(tmp_path, BASE.replace("name: t", "name: 2024-05-01")
                           + "norm_eps: 1e-6\nlayers: {default: mamba}\n"))
    assert (r.name, r.norm_eps) == ("2024-05-01", 1e-6)


@pytest.mark.parametrize("text, says", [
    ("d_model: 0100", "d_model: 0100 has a leading zero (YAML reads it as the octal number 64)"),
    ("n_layers: 1:30", "n_layers: 1:30 is a base-60 number to YAML (90)"),
    ("mamba: {d_state: 016}", "mamba.d_state: 016 has a leading zero"),
])
def test_integers_yaml_1_1_would_misread_are_refused_naming_the_field(text, says, tmp_path):
    """... and the line, as every other recipe error does."""
    key = text.split(":", 1)[0]
    lines = [ln for ln in BASE.splitlines() if not ln.startswith(key + ":")]
    said = _err(tmp_path, "\n".join(lines) + f"\n{text}\nlayers: {{default: mamba}}\n")
    assert says in said and said.endswith(f"(line {len(lines) + 1})")


def test_only_mamba_has_a_default_section(tmp_path):
    r = load_recipe(_write(tmp_path, BASE + "layers: {default: mamba}\n"))
    assert r.mamba.d_state == 16 and r.gla is None and r.linear is None
    for kind in ("attention", "linear", "gla"):
        msg = _err(tmp_path, BASE + f"layers: {{default: {kind}}}\n")
        assert f"{kind}: layers use {kind} but the recipe has no {kind} section" in msg
        assert "at least n_heads" in msg


def test_every_section_places_or_configures_something(tmp_path):
    att = "attention: {n_heads: 4}\n"
    assert "layers.attention.every: places no layer in a stack of 4 (got 100)" in _err(
        tmp_path, BASE + "layers: {default: mamba, attention: {every: 100}}\n" + att)
    assert "layers.attention.positions: is empty" in _err(
        tmp_path, BASE + "layers: {default: mamba, attention: {positions: []}}\n" + att)
    assert "gla: section given but no layer uses gla" in _err(
        tmp_path, BASE + "layers: {default: mamba}\ngla: {n_heads: 4}\n")


def test_identity_feature_map_is_refused(tmp_path):
    msg = _err(tmp_path, BASE + "layers: {default: linear}\nlinear: {n_heads: 4, feature_map: identity}\n")
    assert "linear.feature_map: identity can make the normaliser" in msg
    assert "allowed: elu1, relu" in msg


def test_rope_needs_an_even_head_dim(tmp_path):
    assert "attention.head_dim: makes head_dim 7 odd" in _err(
        tmp_path, BASE + "layers: {default: attention}\nattention: {n_heads: 4, head_dim: 7}\n")


def test_with_width_keeps_long_names_valid():
    r = parse_recipe({"name": "n" * 128, "d_model": 64, "n_layers": 2, "vocab_size": 300,
                      "layers": {"default": "mamba"}, "mamba": {"head_dim": 16}})
    assert r.with_width(256).name == "n" * 123 + "@d256"
