"""`fsc import`, `fsc verify` and `fsc build` as a newcomer uses them: a config that leaves a
key to transformers' default reads as transformers reads it, a malformed config or weights file
is refused in one line (exit 2), and `fsc verify` checks a published folder's own weights, past
an attention window, at a tolerance that scales with the logits."""

import json

import pytest
from published import COMMON, FAMILIES, save_published

from fsc.errors import ImportRefused
from fsc.imports import import_config

transformers = pytest.importorskip("transformers")


ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                 "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                 "mamba2": "Mamba2ForCausalLM", "bamba": "BambaForCausalLM",
                 "qwen3_next": "Qwen3NextForCausalLM"}


def _config(family: str, **changes) -> dict:
    """The config.json transformers writes for the tiny `family` model, changed."""
    model_type, kwargs = FAMILIES[family]
    cfg = transformers.AutoConfig.for_model(model_type, **{**COMMON, **kwargs})
    data = {**json.loads(cfg.to_json_string(use_diff=False)),
            "architectures": [ARCHITECTURES[model_type]]}
    data.update(changes)
    return data


def _recipe(folder, data: dict) -> str:
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(data))
    try:
        return import_config(str(folder), "x").recipe.to_yaml()
    except ImportRefused as e:
        return f"refused: {str(e).split(': ', 1)[1]}"


@pytest.mark.parametrize(("family", "key"), [
    ("mistral", "sliding_window"), ("mistral", "num_key_value_heads"),
    ("qwen3", "head_dim"), ("qwen3", "num_key_value_heads"),
    ("qwen2", "num_key_value_heads"), ("bamba", "num_key_value_heads"),
    ("qwen3_next", "head_dim"), ("qwen3_next", "num_key_value_heads"),
])
def test_a_key_left_out_reads_as_transformers_default(tmp_path, family, key):
    """A config.json without `key` is read with transformers' default for it (Mistral: a
    window of 4096 tokens, refused; Qwen3-Next: head_dim 256, 2 key/value heads), never with
    one fsc assumes: the recipe equals that of the config transformers fills in."""
    sparse = {k: v for k, v in _config(family).items() if k != key}
    got = _recipe(tmp_path / "sparse", sparse)
    filled = transformers.AutoConfig.from_pretrained(tmp_path / "sparse")
    full = {**json.loads(filled.to_json_string(use_diff=False)),
            "architectures": sparse["architectures"]}
    assert got == _recipe(tmp_path / "full", full)


def test_a_mistral_config_without_sliding_window_slides_as_transformers_does(fsc_main,
                                                                           tmp_path):
    """transformers' MistralConfig defaults to a window of 4,096 keys: fsc's 4,095 before each
    token, in the recipe `fsc import` writes; `sliding_window: null` attends to the whole
    prefix."""
    data = {k: v for k, v in _config("mistral").items() if k != "sliding_window"}
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(data))
    res = fsc_main("import", tmp_path / "m")
    assert res.returncode == 0 and "  window: 4095\n" in res.stdout, res.stderr + res.stdout
    (tmp_path / "m" / "config.json").write_text(json.dumps({**data, "sliding_window": None}))
    res = fsc_main("import", tmp_path / "m")
    assert res.returncode == 0 and "window:" not in res.stdout, res.stdout


@pytest.mark.parametrize(("family", "changes", "words"), [
    ("llama", {"rope_parameters": None, "rope_scaling": "linear"}, "not a LlamaForCausalLM"),
    ("llama", {"rope_parameters": {"rope_type": "linear", "rope_theta": 1e4}}, "needs 'factor'"),
    # both keys, disagreeing: transformers reads the yarn of rope_scaling, fsc read the default
    # of rope_parameters and dropped the scaling unsaid
    ("llama", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
               "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
     "RoPE given twice, as rope_scaling ('yarn') and rope_parameters ('default')"),
    ("llama", {"partial_rotary_factor": "half"}, "not a LlamaForCausalLM"),
    ("llama", {"layer_types": [["full_attention"]] * 2}, "not a LlamaForCausalLM"),
    ("llama", {"tie_word_embeddings": "false"}, "tie_word_embeddings must be true or false"),
    ("llama", {"quantization_config": {"quant_method": "fp8"}}, "quantized weights"),
    ("mamba2", {"time_step_limit": 5}, "not a Mamba2ForCausalLM"),
    ("bamba", {"attn_layer_indices": ["a"]}, "not a BambaForCausalLM"),
    ("qwen3_next", {"decoder_sparse_step": 0}, "not a Qwen3NextForCausalLM"),
    ("qwen3_next", {"mlp_only_layers": 3}, "not a Qwen3NextForCausalLM"),
    ("qwen3_next", {"linear_num_key_heads": 0}, "not a Qwen3NextForCausalLM"),
])
def test_a_malformed_config_is_refused_in_one_line(fsc_main, tmp_path, family, changes, words):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text(json.dumps(_config(family, **changes)))
    for cmd in ("import", "build"):
        res = fsc_main(cmd, "src")
        assert res.returncode == 2, (cmd, res.stderr)
        assert words in res.stderr and res.stderr.count("\n") == 1, res.stderr
        assert "internal error" not in res.stderr


def test_a_malformed_mamba_ssm_config_is_refused(fsc_main, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text(json.dumps({
        "d_model": 64, "n_layer": 2, "vocab_size": 100,
        "ssm_cfg": {"layer": "Mamba2", "dt_limit": "x"}}))
    res = fsc_main("import", "src")
    assert res.returncode == 2 and "not a MambaLMHeadModel" in res.stderr, res.stderr


@pytest.mark.parametrize("cut", ["empty", "garbage", "truncated"])
def test_a_corrupt_safetensors_file_is_refused(fsc_main, tmp_path, cut):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(_config("llama")))
    import torch
    from safetensors.torch import save_file

    save_file({"model.embed_tokens.weight": torch.ones(131, 64)}, src / "model.safetensors")
    whole = (src / "model.safetensors").read_bytes()
    (src / "model.safetensors").write_bytes(
        {"empty": b"", "garbage": b"\xff" * 64, "truncated": whole[:-100]}[cut])
    for args in (("import", "src", "--out", "ck", "--store", "st"),
                 ("decode", "src", "--prompt-ids", "1,2", "--length", "2")):
        res = fsc_main(*args)
        assert res.returncode == 2, res.stderr
        assert "model.safetensors: not a readable safetensors file" in res.stderr, res.stderr
        assert "internal error" not in res.stderr
    assert not (tmp_path / "ck").exists()


def test_sources_of_the_wrong_kind_say_what_they_are(fsc_main, save_tiny, tmp_path):
    ck = save_tiny("ck")
    res = fsc_main("import", ck)
    assert res.returncode == 2 and "an fsc checkpoint, not a published model" in res.stderr
    (tmp_path / "r.yaml").write_text("name: r\n")
    res = fsc_main("import", "r.yaml")
    assert res.returncode == 2 and "r.yaml: not a folder" in res.stderr, res.stderr
    for src in ("tiny_attn", "r.yaml", "missing"):
        res = fsc_main("verify", src, "--against", "transformers")
        assert res.returncode == 2 and "not a published model" in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1


def test_verify_checks_a_published_folder_with_its_own_weights(fsc_main, tmp_path):
    """Qwen3-Next's logits reach about 9 with these weights: fp32 rounding of the cached
    path is then above 1e-5 absolute, within 1e-5 of the largest logit."""
    save_published("qwen3_next", tmp_path / "q")
    res = fsc_main("verify", "q", "--json")
    assert res.returncode == 0, res.stdout
    doc = json.loads(res.stdout)
    assert doc["weights"] == "published weights of q" and doc["exact"]
    logits = doc["checks"][0]
    assert logits["scale"] > 4 and logits["tol"] == pytest.approx(1e-5 * logits["scale"])


def test_verify_runs_past_the_attention_window(fsc_main):
    doc = json.loads(fsc_main("verify", "passkey_hybrid_swa", "--json").stdout)
    assert doc["exact"] and doc["tokens"] > 32  # its window: 32 tokens
    doc = json.loads(fsc_main("verify", "tiny_attn", "--json").stdout)
    assert doc["tokens"] == 12  # no window: 3 blocks of G 4


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_a_qwen_window_is_read_where_layers_slide(tmp_path, family):
    """Qwen2/Qwen3 slide the layers from max_window_layers on (default 28) when
    use_sliding_window is set, as transformers builds layer_types: a model with fewer layers
    attends to the whole prefix, one whose every layer slides imports the window, one with some
    of each is refused (fsc's window is every attention layer's)."""
    base = {k: v for k, v in _config(family).items() if k != "layer_types"}
    plain = _recipe(tmp_path / "plain", {**base, "use_sliding_window": False})
    windowed = {**base, "use_sliding_window": True, "sliding_window": 16}
    for first in (2, None):  # 2 layers: none slides; None: transformers' default, 28
        data = {k: v for k, v in windowed.items() if k != "max_window_layers"}
        got = _recipe(tmp_path / f"w{first}", data if first is None
                      else {**data, "max_window_layers": first})
        assert got == plain
        types = transformers.AutoConfig.from_pretrained(tmp_path / f"w{first}").layer_types
        assert set(types) == {"full_attention"}
    assert "sliding_window 16 on 1 of 2 layers is not supported" in _recipe(
        tmp_path / "w1", {**windowed, "max_window_layers": 1})
    # from layer 0 on: every layer slides alike, the recipe's window (16 keys: 15 before)
    assert "window: 15" in _recipe(tmp_path / "w0", {**windowed, "max_window_layers": 0})


@pytest.mark.slow  # a published model saved and imported
def test_a_line_on_stderr_stays_one_line_in_a_log(fsc_main, tmp_path):
    """stderr read by a pipe or a log file: rich broke a line at 80 columns, before a path
    ("importing ... weights from qwen2 into \\n/tmp/.../ck ..."); it stays one line, as a log
    reader and grep need."""
    save_published("qwen2", tmp_path / "qwen2")
    out = tmp_path / ("a_folder_with_a_long_name_" * 2) / "ck"
    res = fsc_main("import", "qwen2", "--out", out, "--store", tmp_path / "st")
    assert res.returncode == 0, res.stderr
    said = [ln for ln in res.stderr.splitlines() if ln.startswith("importing")]
    assert said == [f"importing Qwen2ForCausalLM weights from qwen2 into {out} ..."], res.stderr
