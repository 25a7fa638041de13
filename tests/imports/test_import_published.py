"""`fsc import`: published configs as recipes, published weights as checkpoints, exact against
transformers at G = 1 (fp32 logits within 1e-4 relative, the same 32 greedy tokens)."""

import json
import shutil

import pytest
import torch
from published import FAMILIES, save_published
from safetensors.torch import load_file, save_file

from fsc.imports import import_config
from fsc.imports import llama as llama_family
from fsc.imports.reference import LOGIT_TOL, check, reference_greedy

pytest.importorskip("transformers")


@pytest.mark.parametrize("family", list(FAMILIES))
def test_cached_decode_is_exact_against_transformers(published, family):
    rep = check(str(published(family)))
    assert rep.max_rel_err <= LOGIT_TOL, rep.max_rel_err
    assert rep.fsc_tokens == rep.reference_tokens
    assert len(rep.fsc_tokens) == 32 and len(set(rep.fsc_tokens)) > 3  # not a degenerate run
    assert rep.exact


def test_sharded_weights_import(tmp_path):
    """Weights in several safetensors files named by model.safetensors.index.json."""
    from transformers import AutoModelForCausalLM

    src = save_published("llama", tmp_path / "one")
    AutoModelForCausalLM.from_pretrained(str(src)).save_pretrained(tmp_path / "sharded",
                                                                   max_shard_size="40KB")
    assert len(list((tmp_path / "sharded").glob("*.safetensors"))) > 1
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    assert check(str(tmp_path / "sharded")).exact


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_the_check_sees_a_wrong_mapping(published, monkeypatch):
    """gate and up swapped: every shape still fits, the logits do not."""
    names = tuple((p, r.replace(r"\2_proj", "{swap}")) if "gate|up|down" in p else (p, r)
                  for p, r in llama_family.NAMES)
    swap = {"gate": "up", "up": "gate", "down": "down"}
    monkeypatch.setattr(llama_family, "NAMES", tuple(
        (p, r) for p, r in names if "{swap}" not in r) + tuple(
        (rf"layers\.(\d+)\.ffn\.{k}\.weight", rf"model.layers.\1.mlp.{v}_proj.weight")
        for k, v in swap.items()))
    rep = check(str(published("llama")))
    assert rep.max_rel_err > 1e-2 and not rep.exact


def test_recipes_name_their_options(published):
    r = import_config(published("llama")).recipe
    assert (r.block_size, r.dtype, r.layer_plan) == (1, "fp32", ["attention"] * 2)
    assert r.attention.bias == "qkvo" and r.attention.rope_theta == 50000.0
    assert r.attention.rope_scaling.kind == "llama3"
    assert (r.mlp.kind, r.mlp.hidden) == ("swiglu", 88)
    q2 = import_config(published("qwen2")).recipe
    assert q2.attention.bias == "qkv" and not q2.tie_embeddings and q2.norm_eps == 1e-5
    q3 = import_config(published("qwen3")).recipe
    assert q3.attention.qk_norm and q3.tie_embeddings and q3.attention.head_dim == 32
    m = import_config(published("mamba2")).recipe
    assert m.mamba.gated_norm and m.mlp.kind == "none" and m.layer_plan == ["mamba"] * 2
    b = import_config(published("bamba")).recipe
    assert b.layer_plan == ["mamba", "attention"] and b.attention.rope_dims == 8
    assert b.mamba.gated_norm and b.mlp.kind == "swiglu"
    n = import_config(published("qwen3_next")).recipe
    assert n.layer_plan == ["gated_delta"] * 3 + ["attention"] and n.layers.attention.every == 4
    assert n.norm_offset and n.norm_eps == 1e-6 and not n.tie_embeddings
    a = n.attention
    assert (a.qk_norm, a.output_gate, a.rope_dims, a.head_dim) == (True, True, 8, 32)
    gd = n.gated_delta
    assert (gd.n_heads, gd.n_v_heads, gd.head_dim, gd.d_conv) == (2, 4, 16, 4)
    assert gd.gated_norm and gd.l2norm_eps == 1e-6
    assert (n.moe.n_experts, n.moe.top_k, n.moe.kind, n.moe.hidden) == (8, 2, "swiglu", 24)
    assert (n.moe.shared_hidden, n.moe.shared_gate) == (40, True)
    nd = import_config(published("qwen3_next_dense")).recipe
    assert nd.layers.attention.positions == [1, 4] and nd.tie_embeddings
    assert nd.attention.bias == "qkvo" and nd.gated_delta.n_v_heads is None
    assert nd.moe is None and (nd.mlp.kind, nd.mlp.hidden) == ("swiglu", 88)


def _tokenizer(folder, vocab_size):
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab_size)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))


def test_import_writes_a_checkpoint_that_decodes_like_transformers(published, fsc_main,
                                                                   tmp_path):
    from transformers import AutoModelForCausalLM

    src = tmp_path / "qwen3"
    shutil.copytree(published("qwen3"), src)
    _tokenizer(src, 131)
    res = fsc_main("import", src, "--out", "ck", "--store", tmp_path / "store", "--json")
    assert res.returncode == 0, res.stderr
    ck = tmp_path / "ck"
    assert "tokenizer.json" in (ck / "checksums.sha256").read_text()
    assert (ck / "fsc_recipe.yaml").read_text().startswith(
        f"# Imported by `fsc import` from {src} (Qwen3ForCausalLM).")
    assert "lm_head.weight" not in load_file(ck / "model.safetensors")  # tied
    prompt = [5, 17, 3, 99, 42]
    res = fsc_main("decode", "ck", "--prompt-ids", ",".join(map(str, prompt)), "--length", "32",
                   "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    ref = AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32).eval()
    assert doc["token_ids"] == reference_greedy(ref, prompt, 32)
    assert doc["prompt_ids"] == prompt
    assert doc["stats"]["weights"] == f"checkpoint ck: published weights of {src} (Qwen3ForCausalLM)"
    assert f"imported by `fsc import` from `{src} (Qwen3ForCausalLM)`" in (ck / "README.md").read_text()
    assert doc["text"].split() == [f"t{i}" for i in doc["token_ids"]]  # its own tokenizer


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_verify_against_transformers_cli(published, fsc_main, monkeypatch):
    res = fsc_main("verify", published("mamba2"), "--against", "transformers", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["exact"] is True
    import fsc.imports.reference as reference

    monkeypatch.setattr(reference, "transformers", None)
    res = fsc_main("verify", published("mamba2"), "--against", "transformers")
    assert res.returncode == 2
    assert "needs the transformers package" in res.stderr and res.stderr.count("\n") == 1


def _config(published, family, **changes):
    data = json.loads((published(family) / "config.json").read_text())
    data.update(changes)
    return data


@pytest.mark.parametrize("family, changes, words", [
    ("mistral", {"sliding_window": 1}, "sliding_window 1"),
    ("qwen2", {"use_sliding_window": True, "sliding_window": 16, "max_window_layers": 1,
               "layer_types": None}, "sliding_window 16 on 1 of 2 layers"),
    ("qwen3", {"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 8},
     "sliding_window 8 on 1 of 2 layers"),
    ("mamba2", {"n_groups": 2}, "n_groups 2"),
    ("mamba2", {"time_step_limit": [0.001, 0.1]}, "time_step_limit"),
    ("bamba", {"mamba_n_groups": 4}, "mamba_n_groups 4"),
    ("llama", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
     "RoPE scaling 'yarn'"),
    ("llama", {"hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ("llama", {"mlp_bias": True}, "mlp_bias"),
    ("llama", {"architectures": ["GPT2LMHeadModel"]}, "architecture GPT2LMHeadModel"),
    ("llama", {"num_key_value_heads": 3}, "n_kv_heads"),
    ("qwen3_next", {"norm_topk_prob": False}, "norm_topk_prob false"),
    ("qwen3_next", {"mlp_only_layers": [0]}, "mlp_only_layers [0]"),
    ("qwen3_next", {"decoder_sparse_step": 2}, "decoder_sparse_step 2"),
    ("qwen3_next", {"linear_value_head_dim": 32}, "linear_value_head_dim 32"),
    ("qwen3_next", {"layer_types": ["linear_attention", "sliding_attention"] * 2},
     "layer_types ['sliding_attention']"),
    ("qwen3_next", {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4,
                                        "partial_rotary_factor": 0.25}}, "RoPE scaling 'yarn'"),
])
def test_what_fsc_cannot_express_is_refused(published, fsc_main, tmp_path, family, changes,
                                            words):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text(json.dumps(_config(published, family,
                                                                     **changes)))
    for cmd in (("import", "src"), ("estimate", "src")):
        res = fsc_main(*cmd)
        assert res.returncode == 2, res.stdout
        assert words in res.stderr and res.stderr.count("\n") == 1, res.stderr
        assert "Traceback" not in res.stderr


def test_weights_that_do_not_fit_are_refused(published, fsc_main, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(published("qwen2"), src)
    state = load_file(src / "model.safetensors")
    del state["model.layers.1.mlp.up_proj.weight"]
    state["model.layers.0.self_attn.extra.weight"] = torch.ones(2)
    save_file(state, src / "model.safetensors")
    res = fsc_main("import", src, "--out", "ck")
    assert res.returncode == 2 and "model.layers.1.mlp.up_proj.weight is missing" in res.stderr
    state["model.layers.1.mlp.up_proj.weight"] = torch.ones(88, 64)
    save_file(state, src / "model.safetensors")
    res = fsc_main("import", src, "--out", "ck")
    assert res.returncode == 2 and "self_attn.extra.weight has no place" in res.stderr
    assert not (tmp_path / "ck").exists()
    (src / "config.json").unlink()
    res = fsc_main("import", src)
    assert res.returncode == 2 and f"{src}: holds no config.json, so no" in res.stderr
    res = fsc_main("import", "nonexistent")
    assert res.returncode == 2 and res.stderr == (
        "error: nonexistent: no such folder; a published model is a folder with config.json, "
        "published/NAME or hf:ORG/NAME\n")


def test_the_multi_token_prediction_head_is_left_out(published, fsc_main, tmp_path):
    """Qwen3-Next's published weights hold an `mtp.*` head beside the causal LM (transformers
    leaves it out too); any other published tensor fsc has no place for is still refused."""
    src = tmp_path / "src"
    shutil.copytree(published("qwen3_next"), src)
    state = load_file(src / "model.safetensors")
    save_file({**state, "mtp.fc.weight": torch.ones(64, 128)}, src / "model.safetensors")
    assert check(str(src)).exact
    save_file({**state, "model.layers.0.linear_attn.extra": torch.ones(2)},
              src / "model.safetensors")
    res = fsc_main("import", src, "--out", "ck")
    assert res.returncode == 2 and "linear_attn.extra has no place" in res.stderr


def test_a_config_alone_is_a_recipe_for_estimate_build_profile(published, fsc_main, tmp_path):
    (tmp_path / "cfg").mkdir()
    shutil.copy(published("llama") / "config.json", tmp_path / "cfg")
    res = fsc_main("estimate", "cfg", "--S", "262144", "--G", "1", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["recipe"] == "cfg"
    res = fsc_main("build", "cfg", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["layer_plan"] == ["attention", "attention"]
    res = fsc_main("profile", "-r", "cfg", "--S", "8", "--B", "1", "--warmup", "0",
                   "--repeats", "1", "--store", tmp_path / "store", "--json")
    assert res.returncode == 0, res.stderr
    res = fsc_main("import", "cfg", "--out", "r.yaml")
    assert res.returncode == 0 and (tmp_path / "r.yaml").read_text().startswith("# Imported")
    res = fsc_main("estimate", "r.yaml", "--S", "1024", "--G", "1", "--json")
    assert res.returncode == 0, res.stderr


@pytest.mark.slow  # 4-5 s (a published folder saved by transformers): make test-slow
def test_decode_prompt_ids_errors(published, fsc_main):
    src = published("llama")
    for args, words in ((("--prompt-ids", "1,x"), "expected comma-separated token ids"),
                        (("--prompt-ids", "1,131"), "token id 131 is outside"),
                        (("--prompt-ids", "1", "--prompt", "hi"), "not both"),
                        (("--prompt-ids", "1", "--mode", "diffusion", "--G", "2"),
                         "no mask token for block diffusion")):
        res = fsc_main("decode", src, *args)
        assert res.returncode == 2 and words in res.stderr, res.stderr


def _as_mamba_ssm(hf_folder, out, pickled: bool):
    """transformers' Mamba-2 folder rewritten as state-spaces ships one: mamba_ssm's config
    and tensor names (backbone.embedding), as safetensors or as a pytorch_model.bin."""
    cfg = json.loads((hf_folder / "config.json").read_text())
    out.mkdir()
    (out / "config.json").write_text(json.dumps({
        "d_model": cfg["hidden_size"], "d_intermediate": 0, "n_layer": cfg["num_hidden_layers"],
        "vocab_size": cfg["vocab_size"] - 3, "pad_vocab_size_multiple": 8,  # padded back
        "ssm_cfg": {"layer": "Mamba2", "d_state": cfg["state_size"], "headdim": cfg["head_dim"],
                    "expand": cfg["expand"], "ngroups": 1, "conv_bias": cfg["use_conv_bias"]},
        "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": True, "residual_in_fp32": True,
        "fused_add_norm": True, "tie_embeddings": cfg.get("tie_word_embeddings", False),
        "torch_dtype": "float32"}))  # the one key added: state-spaces' configs name no dtype
    tensors = {k.replace("backbone.embeddings.", "backbone.embedding."): v
               for k, v in load_file(hf_folder / "model.safetensors").items()}
    if pickled:
        torch.save(tensors, out / "pytorch_model.bin")
    else:
        save_file(tensors, out / "model.safetensors")
    return out


@pytest.mark.parametrize("pickled", [False, True])
def test_mamba_ssm_format_imports_exactly(tmp_path, pickled):
    """state-spaces' Mamba-2 checkpoints (mamba_ssm's config, names, a pytorch_model.bin)
    import as the same model transformers builds from the same weights."""
    from transformers import AutoModelForCausalLM

    from fsc.imports.convert import load_published

    hf_folder = save_published("mamba2", tmp_path / "hf", vocab_size=136)
    src = _as_mamba_ssm(hf_folder, tmp_path / "ssm", pickled)
    imported, model = load_published(str(src))
    assert imported.architecture == "MambaLMHeadModel"
    assert imported.recipe.vocab_size == 136  # 133 padded up to a multiple of 8
    ids = torch.randint(0, 133, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = AutoModelForCausalLM.from_pretrained(str(hf_folder)).eval()(input_ids=ids).logits
        got = model.forward_blockwise(ids, [1] * 24)
    assert torch.allclose(got, want, rtol=LOGIT_TOL, atol=LOGIT_TOL * want.abs().max())


def test_a_pickled_mamba_ssm_folder_imports_as_a_checkpoint(tmp_path, fsc_main):
    """`fsc import` sees a pytorch_model.bin as weights, as the loader does: a checkpoint of the
    published weights, not a recipe file of seeded ones."""
    from transformers import AutoModelForCausalLM

    hf_folder = save_published("mamba2", tmp_path / "hf", vocab_size=136)
    src = _as_mamba_ssm(hf_folder, tmp_path / "ssm", pickled=True)
    res = fsc_main("import", src, "--out", "ck", "--store", tmp_path / "store", "--json")
    assert res.returncode == 0, res.stderr
    assert "checkpoint" in json.loads(res.stdout) and (tmp_path / "ck").is_dir()
    res = fsc_main("decode", "ck", "--prompt-ids", "5,17,3", "--length", "8", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["stats"]["weights"].startswith(f"checkpoint ck: published weights of {src}")
    ref = AutoModelForCausalLM.from_pretrained(str(hf_folder)).eval()
    assert doc["token_ids"] == reference_greedy(ref, [5, 17, 3], 8)


@pytest.mark.parametrize(("change", "says"), [
    ({"ssm_cfg": {"layer": "Mamba1"}}, "ssm_cfg layer 'Mamba1'"),
    ({"attn_layer_idx": [1]}, "attn_layer_idx"),
    ({"ssm_cfg": {"layer": "Mamba2", "ngroups": 8}}, "ssm_cfg ngroups 8"),
    ({"d_intermediate": 128}, "d_intermediate 128"),
])
def test_what_mamba_ssm_configs_fsc_cannot_express_are_refused(tmp_path, change, says):
    from fsc.errors import ImportRefused

    (tmp_path / "config.json").write_text(json.dumps({
        "d_model": 64, "n_layer": 2, "vocab_size": 100, "ssm_cfg": {"layer": "Mamba2"},
        **change}))
    with pytest.raises(ImportRefused, match=says):
        import_config(str(tmp_path))
