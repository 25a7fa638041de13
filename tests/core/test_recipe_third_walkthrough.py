"""fsc build, fsc verify, fsc recipes and recipe YAML, third pass: a schema error names the line
of the field, a mixer's key in another mixer's section says whose it is, an empty layers entry is
named, `--set state_dtype` that changes nothing is refused, a failing verify says where it first
went wrong, the experiments are listed, and an MoE recipe's counts against a count by hand."""

import json

import pytest

from fsc.recipe import load_recipe, parse_changes, shipped_dir
from fsc.recipe_yaml import MAX_MESSAGE

HEAD = "name: x\nd_model: 64\nn_layers: 4\nvocab_size: 300\n"  # lines 1-4
PATTERN = "layers: {pattern: MMMA}\nattention: {n_heads: 4}\n"  # lines 5-6


def _flat(text: str) -> str:
    return " ".join(text.split())


def _refused(res, *expected) -> str:
    """Exit 2 with one line on stderr saying each of `expected`, nothing on stdout."""
    assert res.code == 2, (res.out, res.err)
    assert res.out == "" and "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) == 1, res.err
    said = _flat(res.err)
    for text in expected:
        assert text in said, said
    return said


def _build(cli, tmp_path, text: str, name: str = "mine.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path, cli("build", path)


@pytest.mark.parametrize("text, expected, line", [
    (HEAD + PATTERN + "mamba:\n  expand: 2\n  d_state: 0\n",
     "mamba.d_state: too small (got 0); allowed: an integer from 1 to 1024", 9),
    (HEAD + "layers: {pattern: MMMA}\nattention:\n  n_kv_heads: 4\n",  # missing: its section's
     "attention.n_heads: required field is missing; allowed: an integer from 1 to 1024", 6),
    (HEAD + "layers:\n  default: mamba\n  attention:\n    positions:\n      - 4\n      - 4.0\n"
     "attention: {n_heads: 4}\n", "layers.attention.positions.1: expected an integer (got 4.0)", 10),
    (HEAD + "layers: {pattern: MMMA}\nattention:\n  <<: {n_heads: 4}\n  n_heads: 3\n",
     "attention.n_heads: does not divide d_model 64 (got 3)", 8),  # the key given, not merged
])
def test_a_schema_error_names_the_line_of_its_field(tmp_path, cli, text, expected, line):
    """The message named the field but no line: in a recipe of nested sections a field's name
    (`n_heads` is in four of them) does not say where to look."""
    path, res = _build(cli, tmp_path, text)
    said = _refused(res, f"{path}: {expected}")
    assert said.endswith(f"(line {line})"), said


def test_the_line_is_kept_when_a_long_message_is_cut(tmp_path, cli):
    key = "k" * 300
    path, res = _build(cli, tmp_path, HEAD + PATTERN + f"mamba: {{{key}: 1}}\n")
    said = _refused(res, f"{path}: mamba.k")
    assert said.endswith("(line 7)") and len(res.err.strip()) <= len("error: ") + MAX_MESSAGE


def test_a_file_without_a_line_still_reads_as_before(tmp_path, cli):
    path, res = _build(cli, tmp_path, "name: x\nd_model: 64\n" + PATTERN)
    said = _refused(res, f"{path}: n_layers: required field is missing")
    assert "(line" not in said


@pytest.mark.parametrize("section, key, home", [
    ("attention: {n_heads: 4, d_state: 8}\n", "attention.d_state", "(a field of mamba)"),
    ("attention: {n_heads: 4}\nmamba: {n_heads: 4}\n", "mamba.n_heads",
     "(a field of attention, linear, gla or gated_delta)"),
    ("attention: {n_heads: 4}\nmlp: {n_experts: 4}\n", "mlp.n_experts", "(a field of moe)"),
])
def test_a_mixer_key_in_another_section_says_whose_it_is(tmp_path, cli, section, key, home):
    """At the top level `d_state` said `it belongs in mamba`; inside attention it said only
    `unknown key`, as if d_state were no field at all."""
    path, res = _build(cli, tmp_path, HEAD + "layers: {pattern: MMMA}\n" + section)
    _refused(res, f"{path}: {key}: unknown key {home}")


@pytest.mark.parametrize("layers", ["  pattern: MMMA\n  attention:\n",
                                    "  default: mamba\n  attention:\n"])
def test_an_empty_layers_entry_is_named(tmp_path, cli, layers):
    """`attention:` with nothing after it under layers was read as no entry: beside a pattern
    the recipe built (the combination the schema refuses), beside default the error blamed the
    attention section (`section given but no layer uses attention`)."""
    path, res = _build(cli, tmp_path, HEAD + "layers:\n" + layers + "attention: {n_heads: 4}\n")
    _refused(res, f"{path}: layers.attention: is empty: no placement given (got null); allowed: "
                  "one of positions, every or count, or no attention entry (line 7)")


def test_placement_beside_positions_says_what_is_allowed(tmp_path, cli):
    """`allowed: uniform, back_dense` answered `placement: uniform`, an allowed value."""
    text = HEAD + ("layers:\n  default: mamba\n  attention: {positions: [4], count: 1, "
                   "placement: uniform}\nattention: {n_heads: 4}\n")
    path, res = _build(cli, tmp_path, text)
    said = _refused(res, f"{path}: layers.attention.placement: applies to count, not to explicit "
                         "positions (got 'uniform'); allowed: placement beside count, without "
                         "positions")
    assert "back_dense" not in said


@pytest.mark.parametrize("recipe", ["tiny_attn", "tiny_linear"])
def test_set_state_dtype_where_no_cache_follows_it_is_refused(cli, tmp_path, recipe):
    """tiny_attn's K/V are in dtype, tiny_linear's sums in fp32: `--set state_dtype=bf16`
    scored the same model under another name."""
    res = cli("eval", recipe, "--set", "state_dtype=bf16", "--store", tmp_path / "store")
    _refused(res, f"--set state_dtype: no cache of {recipe} is held in state_dtype")
    assert not (tmp_path / "store").exists()
    changed = load_recipe("tiny_hybrid").changed(parse_changes(["state_dtype=bf16"]))
    assert changed.state_dtype == "bf16"  # a Mamba state follows it


@pytest.mark.parametrize("value, shown", [("yes", "attention.logn=true"),
                                          ("'128'", "attention.logn='128'"),
                                          (".inf", "attention.logn=.inf")])
def test_a_set_value_refused_is_shown_as_yaml_reads_it(cli, tmp_path, value, shown):
    """The message's source read `--set attention.logn=True` (or `=128` for the text '128',
    then `got '128'`): Python's spelling, not the value given."""
    res = cli("eval", "tiny_attn", "--set", f"attention.logn={value}", "--store",
              tmp_path / "store")
    _refused(res, f"tiny_attn with --set {shown}: attention.logn:")


def _broken(monkeypatch, how: str):
    """Mamba's fold that writes nothing (`fold`) or a step that writes (`step`)."""
    from fsc.model import MIXER_REGISTRY

    mamba = MIXER_REGISTRY["mamba"]
    block = mamba._block
    monkeypatch.setattr(mamba, "_block", lambda self, x, cache, commit:
                        block(self, x, cache, commit=(how == "step")))


@pytest.mark.parametrize("how, where", [
    ("fold", "mamba mixer: first wrong at the step of block 2, which reads what the fold of "
             "block 1 wrote"),
    ("step", "mamba mixer: first wrong at a second step of block 1: the first step changed the "
             "cache"),
])
def test_a_broken_cache_says_where_it_first_goes_wrong(cli, monkeypatch, how, where):
    """A broken cache failed with `NOT exact` and the largest error: nothing said whether the
    step, the fold or the cache it left was wrong."""
    _broken(monkeypatch, how)
    res = cli("verify", "tiny_mamba")
    assert res.code == 1, res.err
    said = _flat(res.out)
    assert where in said and said.endswith("NOT exact"), said
    doc = json.loads(cli("verify", "tiny_mamba", "--json").out)
    first = {c["kind"]: c.get("first_wrong") for c in doc["checks"]}
    assert first["mamba"] and first["model"], first


def test_nan_weights_are_named_not_blamed_on_the_cache(cli, tmp_path):
    """A checkpoint whose weights hold a NaN failed "first wrong at the step of block 1, on an
    empty cache": the cached decoder was blamed for what the uncached forward does too."""
    import torch

    from fsc.checkpoint.io import save_checkpoint
    from fsc.model.lm import build_model
    from fsc.recipe import load_recipe

    model = build_model(load_recipe("tiny_attn"), seed=0)
    with torch.no_grad():
        next(p for n, p in model.named_parameters() if n.endswith("mixer.wq.weight"))[0, 0] = \
            float("nan")
    save_checkpoint(model, tmp_path / "ck")
    res = cli("verify", tmp_path / "ck")
    assert res.code == 1 and _flat(res.out).endswith("NOT exact"), res.out
    assert ("model logits: first wrong at the uncached forward itself, whose output holds NaN "
            "or inf") in _flat(res.out), res.out


def test_the_drift_title_names_states_only_where_there_are_some(cli):
    """`fsc verify tiny_attn --dtype bf16` said "(states fp32)" of a model that holds none."""
    said = _flat(cli("verify", "tiny_attn", "--dtype", "bf16", "--length", "16").out)
    assert "drift: cached bf16 vs fp32" in said and "states" not in said, said
    said = _flat(cli("verify", "tiny_mamba", "--dtype", "bf16", "--length", "16").out)
    assert "drift: cached bf16 (states fp32) vs fp32" in said, said


def test_a_drift_check_past_its_tolerance_names_the_block(cli, monkeypatch):
    _broken(monkeypatch, "fold")
    res = cli("verify", "tiny_mamba", "--dtype", "bf16", "--length", "16")
    assert res.code == 1
    assert "mamba mixer: first past the tolerance at block 2 of 4" in _flat(res.out), res.out


def test_a_right_cache_names_no_failure(cli):
    doc = json.loads(cli("verify", "tiny_mamba", "--json").out)
    assert doc["exact"] and all("first_wrong" not in c for c in doc["checks"])


@pytest.mark.parametrize("G", ["0", "-1"])
def test_a_block_size_out_of_range_says_the_range(cli, G):
    """--G 0 was told a denoiser's check needs G > 1, as if 1 were the problem."""
    _refused(cli("verify", "tiny_hybrid", "--G", G), f"--G {G} must be between 1 and 4096")


def test_recipes_lists_the_experiments_and_a_typo_finds_one(cli):
    """recipes/experiments/ (the recipes docs/benchmarks.md runs) were not listed, and a
    misspelt one suggested nothing."""
    rows = {r["name"]: r for r in json.loads(cli("recipes", "--json").out)}
    names = {f"experiments/{p.stem}" for p in (shipped_dir() / "experiments").glob("*.yaml")}
    assert names and names <= set(rows)
    row = rows["experiments/passkey_hybrid_first"]
    assert row["n_params"] == json.loads(cli("build", row["name"], "--json").out)["n_params"]
    _refused(cli("build", "experiments/passkey_hybrid_firs"),
             "did you mean experiments/passkey_hybrid_first?")


def test_an_moe_recipe_by_hand(cli):
    """Qwen3-Next-80B-A3B (d 2048, 48 layers, vocab 151,936; 12 gated attention layers of 16
    heads, 2 KV heads of 256; 36 Gated DeltaNet layers of 16 q/k heads and 32 value heads of
    128, conv 4; 512 SwiGLU experts of 512, a gated shared expert of 512), S 8192, B 1."""
    rep = json.loads(cli("build", "published/Qwen3-Next-80B-A3B", "--json").out)
    d, v, hd, heads, kv = 2048, 151_936, 256, 16, 2
    q = d * heads * hd
    attention = 3 * q + 2 * d * kv * hd + 2 * hd  # q, output gate, o; k, v; qk norms
    qk, val = 16 * 128, 32 * 128
    conv = 2 * qk + val
    delta = d * (2 * qk + 2 * val + 2 * 32) + 2 * 32 + conv * 4 + 128 + val * d
    moe = d * 512 + 512 * 3 * d * 512 + 3 * d * 512 + d  # router, experts, shared, its gate
    assert rep["params_by_kind"] == {"embedding": 2 * v * d, "norm": 48 * 2 * d + d,
                                     "gated_delta": 36 * delta, "moe": 48 * moe,
                                     "attention": 12 * attention}
    assert rep["n_params"] == 79_674_391_296 and rep["weight_bytes"] == 2 * 79_674_391_296
    kv_bytes = 12 * 2 * 8192 * kv * hd * 2  # layers, (K, V), S, heads, head_dim, bf16
    state = 36 * (32 * 128 * 128 + conv * 3) * 4  # fp32 states and conv windows
    assert rep["cache"] == {"S": 8192, "B": 1, "kv_bytes": kv_bytes, "state_bytes": state,
                            "total_bytes": kv_bytes + state}


def test_rope_dims_without_rope_says_so(cli, tmp_path):
    """It said "allowed: an even number from 2 to 16" of rope_dims 4, which is one: the
    problem was the missing RoPE."""
    _, res = _build(cli, tmp_path, HEAD + "layers: {pattern: AAAA}\n"
                    "attention: {n_heads: 4, position: none, rope_dims: 4}\n")
    _refused(res, "attention.rope_dims: given with position none, which rotates nothing (got "
                  "4); allowed: no rope_dims without position rope")
    _, res = _build(cli, tmp_path, HEAD + "layers: {pattern: AAAA}\n"
                    "attention: {n_heads: 4, rope_dims: 6, head_dim: 4}\n")
    _refused(res, "attention.rope_dims: must be even and at most head_dim 4 (got 6)")


def test_a_pattern_written_as_fsc_build_prints_it_says_to_drop_the_spaces(cli, tmp_path):
    _, res = _build(cli, tmp_path, HEAD.replace("n_layers: 4", "n_layers: 8")
                    + "layers: {pattern: 'MMMA MMMA'}\nattention: {n_heads: 4}\n")
    _refused(res, "layers.pattern: unknown letter ' ' (write the letters without spaces: "
                  "MMMAMMMA)")
