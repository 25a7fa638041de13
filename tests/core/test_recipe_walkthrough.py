"""A researcher writing their own recipe: copy a shipped one, change it, run every command on it;
and the mistakes made on the way, each one line (file, field, what is allowed), exit 2."""

import json
import re

import pytest

from fsc.recipe import load_recipe, shipped_recipes

TINY = shipped_recipes()["tiny_hybrid"].read_text()


def _copy(tmp_path, *edits, name="mine.yaml"):
    """tiny_hybrid copied to tmp_path with each (old, new) edit made (old must be there)."""
    text = TINY.replace("name: tiny_hybrid", "name: mine")
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def _one_line(res, path, *expected):
    """The CLI refused `path` on one line naming it and saying `expected`, exit 2."""
    assert res.code == 2, res.err
    assert res.out == "" and "Traceback" not in res.err
    msg = " ".join(res.err.split())  # rich wraps at 80 columns in CI
    assert msg.startswith(f"error: {path}:"), msg
    for text in expected:
        assert text in msg, msg


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_boolean_field_says_true_or_false(tmp_path, cli):
    path = _copy(tmp_path, ("\ndtype: fp32\n", "\ndtype: fp32\ntie_embeddings: 'yes'\n"))
    _one_line(cli("build", path), path, "tie_embeddings: expected true or false (got 'yes'); "
              "allowed: true or false")
    path = _copy(tmp_path, ("head_dim: 16}\nmamba", "head_dim: 16, qk_norm: 1}\nmamba"))
    _one_line(cli("build", path), path, "attention.qk_norm: expected true or false (got 1)")


@pytest.mark.parametrize("edit, expected", [
    (("default: mamba", "default: mambe"),
     "layers.default: not an allowed value (did you mean mamba?) (got 'mambe')"),
    (("{every: 4}", "{count: 1, placement: back-dense}"),
     "layers.attention.placement: not an allowed value (did you mean back_dense?)"),
    (("moe: {n_experts: 4, top_k: 2, hidden_ratio: 2}", "mlp: {kind: swiglue}"),
     "mlp.kind: not an allowed value (did you mean swiglu?) (got 'swiglue'); allowed: gelu, "
     "swiglu, none"),
])
def test_a_misspelt_choice_suggests_the_right_one(tmp_path, cli, edit, expected):
    path = _copy(tmp_path, edit)
    _one_line(cli("build", path), path, expected)


def test_a_choice_not_close_to_any_suggests_none(tmp_path, cli):
    path = _copy(tmp_path, ("\ndtype: fp32\n", "\ndtype: float64\n"))
    res = cli("build", path)
    _one_line(res, path, "dtype: not an allowed value (got 'float64'); allowed: bf16, fp16, fp32")
    assert "did you mean" not in res.err


def test_an_unclosed_bracket_names_where_it_began(tmp_path, cli):
    """PyYAML finds an unclosed `{` where the next key fails, lines below it: the line it
    began on is named too."""
    path = _copy(tmp_path, ("{n_heads: 4,", "{n_heads: 4\n  "))
    _one_line(cli("build", path), path, "YAML syntax error at line 13, column",
              "while parsing a flow mapping (begun at line 12,")


@pytest.mark.parametrize("edit, at", [
    (("  default: mamba", "\tdefault: mamba"), "line 10, column 1"),
    (("{n_heads: 4,", "{n_heads: 4,\t"), "line 12"),
])
def test_a_tab_says_to_indent_with_spaces(tmp_path, cli, edit, at):
    path = _copy(tmp_path, edit)
    _one_line(cli("build", path), path, f"YAML syntax error at {at}",
              "allowed: spaces (YAML indents with spaces, never tabs)")


@pytest.mark.parametrize("edit, expected", [
    (("d_model: 64\n", "d_model: 64\ntrue: 3\n"), "true: unknown key; allowed: name, d_model"),
    (("d_model: 64\n", "d_model: 64\n~: 3\n"), "~: unknown key; allowed: name, d_model"),
    (("d_state: 8", "8: 8"), "mamba.8: unknown key; allowed: d_state, expand"),
    (("d_model: 64\n", "d_model: 64\n1: 3\n'1': 4\n"), "1: duplicate key at lines 4 and 5"),
])
def test_a_key_is_named_as_written(tmp_path, cli, edit, expected):
    """A key YAML reads as something other than text reached the schema as that: `true:` was
    reported as "1: unknown key", `~:` as "None"; `1:` and `'1':` were two keys."""
    path = _copy(tmp_path, edit)
    _one_line(cli("build", path), path, expected)


def test_a_lower_case_pattern_says_letters_are_upper_case(tmp_path, cli):
    path = _copy(tmp_path, ("  default: mamba\n  attention: {every: 4}\n", "  pattern: mmma\n"))
    _one_line(cli("build", path), path,
              "layers.pattern: unknown letter 'a' (letters are upper case: MMMA) (got 'mmma')")
    path = _copy(tmp_path, ("  default: mamba\n  attention: {every: 4}\n", "  pattern: mmmx\n"))
    res = cli("build", path)
    _one_line(res, path, "layers.pattern: unknown letter 'm' (got 'mmmx')")
    assert "upper case" not in res.err


@pytest.mark.parametrize("recipe, edits, expected", [
    # linear attention's sums are fp32 whatever state_dtype says: "bf16 states" was shown
    ("tiny_linear", (("state_dtype: fp32", "state_dtype: bf16"),),
     "fp32 weights, states: linear fp32 (state_dtype bf16 unused)"),
    ("tiny_attn", (), "fp32 weights, no fixed-size state (state_dtype fp32 unused)"),
    ("tiny_hybrid", (("state_dtype: fp32", "state_dtype: bf16"),), "fp32 weights, bf16 states"),
])
def test_build_shows_the_dtype_each_state_is_held_in(tmp_path, cli, recipe, edits, expected):
    text = shipped_recipes()[recipe].read_text()
    for old, new in edits:
        text = text.replace(old, new)
    path = tmp_path / "r.yaml"
    path.write_text(text)
    res = cli("build", path)
    assert res.code == 0, res.err
    assert expected in _flat(res.out)


def test_build_shows_the_ffn_and_the_head_asked_for(tmp_path, cli):
    path = _copy(tmp_path, ("block_size: 4\n", "block_size: 4\ntie_embeddings: true\n"
                            "logit_shift: true\n"))
    res = cli("build", path)
    assert res.code == 0, res.err
    assert ("ffn moe: 4 gelu experts of width 128, top 2 head tied to the embedding, logits "
            "shifted (position j read from j - 1)") in _flat(res.out)
    path = _copy(tmp_path, ("moe: {n_experts: 4, top_k: 2, hidden_ratio: 2}",
                            "mlp: {kind: swiglu, hidden: 96}"))
    res = cli("build", path, "--json")
    rep = json.loads(res.out)
    assert rep["ffn"] == "mlp: swiglu, width 96"
    assert (rep["tie_embeddings"], rep["logit_shift"]) == (False, False)
    assert rep["state_dtypes"] == {"mamba": "fp32"}
    # a sliding window's ring is a fixed state in the weights' dtype
    path = _copy(tmp_path, ("\ndtype: fp32", "\ndtype: bf16"),
                 ("head_dim: 16}\nmamba", "head_dim: 16, window: 8}\nmamba"))
    rep = json.loads(cli("build", path, "--json").out)
    assert rep["state_dtypes"] == {"mamba": "fp32", "attention": "bf16"}


def test_the_hash_follows_the_numbers_not_the_spelling(tmp_path):
    """Comments, key order, defaults spelled out and 10000 against 10000.0 change no hash; a
    field that changes the numbers does."""
    plain = load_recipe(_copy(tmp_path))
    lines = [ln for ln in TINY.replace("name: tiny_hybrid", "name: mine").splitlines()
             if ln and not ln.startswith("#")]
    spelled = "\n".join(reversed(lines[:7])) + "\n" + "\n".join(lines[7:]) + (
        "\nnorm_eps: 1.0e-5\ntie_embeddings: false  # the default\n")
    spelled = spelled.replace("head_dim: 16}\nmamba", "head_dim: 16, rope_theta: 10000.0}\nmamba")
    (tmp_path / "spelled.yaml").write_text(spelled)
    assert load_recipe(tmp_path / "spelled.yaml").recipe_hash == plain.recipe_hash
    for edit in (("block_size: 4", "block_size: 8"), ("state_dtype: fp32", "state_dtype: bf16"),
                 ("head_dim: 16}\nmamba", "head_dim: 16, window: 8}\nmamba")):
        assert load_recipe(_copy(tmp_path, edit)).recipe_hash != plain.recipe_hash


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_recipe_of_ones_own_runs_through_every_command(tmp_path, cli):
    """tiny_hybrid changed as a user would (a pattern, a window, a SwiGLU MLP, tied
    embeddings, the logit shift, G 2, bf16 states): build, estimate, decode, verify, train."""
    path = _copy(tmp_path, ("  default: mamba\n  attention: {every: 4}\n", "  pattern: MA\n"),
                 ("block_size: 4", "block_size: 2\ntie_embeddings: true\nlogit_shift: true"),
                 ("state_dtype: fp32", "state_dtype: bf16"),
                 ("head_dim: 16}\nmamba", "head_dim: 16, rope_theta: 500000, window: 6}\nmamba"),
                 ("moe: {n_experts: 4, top_k: 2, hidden_ratio: 2}", "mlp: {kind: swiglu}"))
    r = load_recipe(path)
    build = cli("build", path)
    assert build.code == 0, build.err
    shown = _flat(build.out)
    for text in (f"mine hash {r.recipe_hash}", "layers MAMA G 2, fp32 weights",
                 "states: mamba bf16, attention fp32", "ffn mlp: swiglu, width 256",
                 "head tied to the embedding, logits shifted",
                 "RoPE, theta 500000; sliding window of 6 tokens"):
        assert text in shown, shown
    assert cli("estimate", path).code == 0
    dec = cli("decode", path, "--length", "8", "--json")
    assert dec.code == 0, dec.err
    assert json.loads(dec.out)["stats"]["tokens"] == 8
    ver = cli("verify", path)
    assert ver.code == 0 and re.search(r"\bexact\b", ver.out), ver.out
    res = cli("train", path, "--data", "copy", "--seq-len", "32", "--train-steps", "2",
              "--out", tmp_path / "run", "--store", tmp_path / "store")
    assert res.code == 0, res.err
    assert "trained mine to step 2 of 2" in _flat(res.err + res.out)


def test_a_rope_theta_without_rope_is_refused(tmp_path, cli):
    """A base for a rotation that never happens changed the hash alone; its default, which
    a recipe written back out carries, is read as before."""
    path = _copy(tmp_path, ("n_kv_heads: 2, head_dim: 16}",
                            "n_kv_heads: 2, head_dim: 16, position: none, rope_theta: 500000}"))
    _one_line(cli("build", path), path, "attention.rope_theta: given without RoPE (got 500000.0)",
              "allowed: no rope_theta (or its default 10000) with position none")
    written = tmp_path / "written.yaml"
    written.write_text(load_recipe("passkey_attn_nope").to_yaml())
    assert "rope_theta: 10000.0" in written.read_text()
    assert cli("build", written).code == 0
    r = cli("eval", "passkey_attn_nope", "--set", "attention.rope_theta=1000", "--store",
            tmp_path / "st")
    assert r.code == 2 and "attention.rope_theta: given without RoPE" in r.err
