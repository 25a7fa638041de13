"""Tiny random-weight published models, built with transformers and saved with
save_pretrained (no network): one per imported family, each with the options that family
brings (GQA, RoPE theta and scaling, biases, qk-norm, tied embeddings, gated norm)."""

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
    "qwen2": ("qwen2", {**ATTN, "rms_norm_eps": 1e-5}),
    "qwen3": ("qwen3", {**ATTN, "head_dim": 32, "tie_word_embeddings": True}),
    "mamba2": ("mamba2", {"num_heads": 8, "head_dim": 16, "state_size": 16, "n_groups": 1,
                          "expand": 2, "use_conv_bias": False}),
    "bamba": ("bamba", {**ATTN, "attn_layer_indices": [1], "mamba_n_heads": 8,
                        "mamba_d_head": 16, "mamba_d_state": 16, "mamba_n_groups": 1,
                        "mamba_chunk_size": 16, "rope_theta": 20000.0}),
}


def save_published(family: str, folder: Path, seed: int = 0, **overrides) -> Path:
    """A tiny `family` model with random weights (larger than the init's, so every layer moves
    the logits), saved with save_pretrained into `folder`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, kwargs = FAMILIES[family]
    config = AutoConfig.for_model(model_type, **{**COMMON, **kwargs, **overrides})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 2 and "embed" not in name:
                p.normal_(0.0, 0.15)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.1)
            elif "norm" in name:
                p.uniform_(0.5, 1.5)
    model.save_pretrained(folder)
    return folder
