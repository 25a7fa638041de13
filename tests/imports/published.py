"""Tiny random-weight published models, built with transformers and saved with
save_pretrained (no network): one per imported family, each with the options that family
brings (GQA, RoPE theta and scaling, biases, qk-norm, tied embeddings, gated norm, experts)."""

from pathlib import Path

import torch

COMMON = {"vocab_size": 131, "hidden_size": 64, "num_hidden_layers": 2, "dtype": "float32"}
ATTN = {"intermediate_size": 88, "num_attention_heads": 4, "num_key_value_heads": 2}

FAMILIES = {
    "llama": ("llama", {**ATTN, "rope_theta": 50000.0, "attention_bias": True,
                        "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                         "original_max_position_embeddings": 16}}),
    "mistral": ("mistral", {**ATTN, "head_dim": 24, "sliding_window": None,
                            "rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
    # every layer through a window of 8 keys (fsc's attention.window 7), shorter than a decode
    "mistral_window": ("mistral", {**ATTN, "sliding_window": 8}),
    "qwen2": ("qwen2", {**ATTN, "rms_norm_eps": 1e-5}),
    "qwen3": ("qwen3", {**ATTN, "head_dim": 32, "tie_word_embeddings": True}),
    "mamba2": ("mamba2", {"num_heads": 8, "head_dim": 16, "state_size": 16, "n_groups": 1,
                          "expand": 2, "use_conv_bias": False}),
    "bamba": ("bamba", {**ATTN, "attn_layer_indices": [1], "mamba_n_heads": 8,
                        "mamba_d_head": 16, "mamba_d_state": 16, "mamba_n_groups": 1,
                        "mamba_chunk_size": 16, "rope_theta": 20000.0}),
    # Layers D D D A: Gated DeltaNet (2 query/key heads, 4 value heads) and gated attention
    # (rotating a quarter of each head); 8 SwiGLU experts, 2 a token, a gated shared expert.
    "qwen3_next": ("qwen3_next", {**ATTN, "num_hidden_layers": 4, "head_dim": 32,
                                  "rope_theta": 20000.0, "linear_num_key_heads": 2,
                                  "linear_num_value_heads": 4, "linear_key_head_dim": 16,
                                  "linear_value_head_dim": 16, "num_experts": 8,
                                  "num_experts_per_tok": 2, "moe_intermediate_size": 24,
                                  "shared_expert_intermediate_size": 40}),
    # Its other branches: layers A D D A (positions, not every), projection biases, one value
    # head per query/key head, no experts (a SwiGLU MLP), tied embeddings.
    "qwen3_next_dense": ("qwen3_next", {
        **ATTN, "num_hidden_layers": 4, "head_dim": 16, "attention_bias": True,
        "layer_types": ["full_attention", "linear_attention", "linear_attention",
                        "full_attention"],
        "linear_num_key_heads": 4, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
        "linear_value_head_dim": 16, "num_experts": 0, "tie_word_embeddings": True}),
}


def save_published(family: str, folder: Path, seed: int = 0, **overrides) -> Path:
    """A tiny `family` model with random weights (larger than the init's, so every layer moves
    the logits), saved with save_pretrained into `folder`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from fsc.imports.reference import torch_paths

    model_type, kwargs = FAMILIES[family]
    config = AutoConfig.for_model(model_type, **{**COMMON, **kwargs, **overrides})
    torch.manual_seed(seed)
    with torch_paths():  # the model's code, first imported here, runs on the CPU
        model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if (p.ndim == 2 and "embed" not in name) or "experts." in name:  # + stacked experts
                p.normal_(0.0, 0.15)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.1)
            elif "norm" in name:
                p.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    return folder


BPE_SPECIALS = ("<unk>", "<s>", "</s>")  # ids 0, 1, 2, as Llama's tokenizer numbers them


def save_bpe_tokenizer(folder: Path, vocab_size: int = 300) -> Path:
    """A byte-level BPE tokenizer learned from the shipped Shakespeare (no download), whose
    post-processor begins a text with `<s>` as Llama's does (tokenizer.json) and whose
    tokenizer_config.json names `<s>` and `</s>` (no `add_bos_token`: the post-processor
    decides, as in Llama 3's folders)."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from fsc.corpora import read

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(BPE_SPECIALS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([read("shakespeare")[:20000]], trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
         "unk_token": "<unk>", "model_max_length": 2048}))
    return folder


def save_llama_with_bos(folder: Path, seed: int = 0) -> Path:
    """A tiny Llama (random weights) beside `save_bpe_tokenizer`'s tokenizer: the case of an
    imported model whose tokenizer is not bytes and adds BOS."""
    save_published("llama", folder, seed=seed, vocab_size=320, bos_token_id=1, eos_token_id=2)
    return save_bpe_tokenizer(folder)
