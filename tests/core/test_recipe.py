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
     "mamba.d_stat: unknown key; allowed here: d_state, expand, d_conv, head_dim"),
    (BASE + "layers: [default: mamba\n", "YAML syntax error at line"),
    (BASE.replace("d_model: 64", "d_model: sixty") + "layers: {default: mamba}\n", "d_model"),
    (BASE + "layers: {default: mamba, attention: {positions: [2, 5]}}\nattention: {n_heads: 4}\n",
     "position 5 is outside 1..4"),
    (BASE + "layers: {default: mamba, attention: {positions: [1, 2], count: 3}}\nattention: {n_heads: 4}\n",
     "positions has 2 entries but count is 3"),
    (BASE + "layers: {default: attention}\nattention: {n_heads: 8, n_kv_heads: 3, head_dim: 8}\n",
     "n_heads 8 is not a multiple of n_kv_heads 3"),
    (BASE + "layers: {pattern: MMXA}\n", "unknown letter 'X'"),
    (BASE.replace("d_model: 64", "d_model: -64") + "layers: {default: mamba}\n", "d_model"),
    (BASE + "layers: {default: mamba}\nmamba: {d_state: 0}\n", "mamba.d_state"),
    (BASE + "layers: {default: attention}\n", "no attention section"),
    (BASE + "layers: {default: transformer}\n", "'transformer' is not allowed"),
    (BASE + "layers: {pattern: MMA}\n", "pattern length 3 does not divide n_layers 4"),
    (BASE + "layers: {default: mamba}\nmlp: {hidden_ratio: 4}\nmoe: {n_experts: 4}\n", "mlp or moe"),
    (BASE + "layers: {default: mamba}\nmoe: {n_experts: 2, top_k: 3}\n", "top_k 3 exceeds n_experts 2"),
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
