"""`fsc verify`, second walkthrough: a cached path that writes NaN fails the check, the
bf16/fp16 drift checks the steps a decode runs as well as the folds, the memory check counts
the uncached pass's attention mask, and the messages of --length and --against name what the
user gave."""

import json

import pytest
from fsc_run import in_process

from fsc import verify as verify_lib
from fsc.checkpoint.layout import read_checksums, write_checksums
from fsc.errors import WeightsDoNotFit
from fsc.model.attention import Attention
from fsc.model.mamba import Mamba
from fsc.recipe import load_recipe

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 131,
         "hidden_size": 64, "intermediate_size": 88, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 2, "rms_norm_eps": 1e-6,
         "rope_theta": 10000.0, "tie_word_embeddings": False}


def one_line(text: str) -> str:
    return " ".join(text.split())


def nan_steps(monkeypatch):
    """Attention's step (forward) returns NaN; its fold is left right."""
    forward = Attention.forward
    monkeypatch.setattr(Attention, "forward", lambda self, x, cache: forward(self, x, cache) * float("nan"))


def test_an_exactness_check_whose_cached_path_is_nan_fails(monkeypatch):
    """Python's max kept the number before a NaN: NaN logits read as exact, exit 0."""
    nan_steps(monkeypatch)
    res = in_process("verify", "tiny_attn", "--B", "1", "--blocks", "2")
    assert res.returncode == 1, res.stdout
    text = one_line(res.stdout)
    assert "│ model logits │ nan │" in text and "│ attention mixer │ nan │" in text
    assert text.endswith("NOT exact")


def test_a_drift_check_whose_state_turns_nan_fails(monkeypatch):
    """A NaN after the first block: the worst block skipped it, the check passed."""
    fold = Mamba.fold

    def poisoned(self, x, cache):
        out = fold(self, x, cache)
        for t in cache.tensors.values():
            t.fill_(float("nan"))
        return out

    monkeypatch.setattr(Mamba, "fold", poisoned)
    res = in_process("verify", "tiny_mamba", "--dtype", "bf16", "--B", "1", "--length", "16",
                     "--json")
    assert res.returncode == 1, res.stdout
    checks = {c["kind"]: c for c in json.loads(res.stdout)["checks"]}
    assert checks["mamba"]["exact"] is False and checks["mamba"]["max_rel_err"] is None
    assert checks["model"]["exact"] is False


def test_the_drift_check_reads_the_steps_a_decode_runs(monkeypatch):
    """bf16/fp16 compared the folds alone: a step (forward) gone wrong passed."""
    forward = Attention.forward
    monkeypatch.setattr(Attention, "forward", lambda self, x, cache: forward(self, x, cache) + 1)
    res = in_process("verify", "tiny_attn", "--dtype", "bf16", "--B", "1", "--length", "16",
                     "--json")
    assert res.returncode == 1, res.stdout
    checks = {c["kind"]: c for c in json.loads(res.stdout)["checks"]}
    assert not checks["attention"]["exact"] and checks["attention"]["first_rel_err"] > 1


def test_a_drift_check_of_a_right_path_still_passes():
    res = in_process("verify", "tiny_hybrid", "--dtype", "bf16", "--B", "1", "--length", "32",
                     "--json")
    assert res.returncode == 0, res.stdout
    assert json.loads(res.stdout)["exact"] is True


def test_the_memory_check_counts_the_block_causal_mask(monkeypatch):
    """The uncached pass builds a [T, T] mask (5 bytes a pair with SDPA's fp32 copy) that the
    cost model does not count: 1M tokens asked for a 1 TiB allocation after the check passed."""
    monkeypatch.setattr("fsc.loading.free_bytes", lambda device: 2**30)
    recipe = load_recipe("tiny_attn")
    with pytest.raises(WeightsDoNotFit, match=r"attention mask 1\.25 GiB"):
        verify_lib.check_memory(recipe, "fp32", 4, 1, 4096, "cpu")  # 16k tokens
    verify_lib.check_memory(recipe, "fp32", 1, 1, 16384, "cpu")  # G 1: the causal kernel
    verify_lib.check_memory(load_recipe("tiny_mamba"), "fp32", 4, 1, 4096, "cpu")


def test_a_length_no_machine_holds_is_refused_before_anything_is_allocated():
    res = in_process("verify", "tiny_attn", "--length", "1m", "--B", "1")
    assert res.returncode == 2
    text = one_line(res.stderr)
    assert "verify over 1048576 tokens (262144 blocks of G 4" in text
    assert "attention mask 5.00 TiB" in text and "give a smaller --length" in text


def test_a_length_of_one_block_names_the_length():
    res = in_process("verify", "tiny_attn", "--length", "3")
    assert res.returncode == 2
    assert "--length 3 is 1 block of G 4: the check needs at least 2" in one_line(res.stderr)


def test_the_table_says_the_tokens_and_which_kernels_ran():
    res = in_process("verify", "tiny_attn", "--B", "1", "--length", "10")
    assert res.returncode == 0, res.stderr
    text = one_line(res.stdout)
    assert "G 4, B 1, 3 blocks (12 tokens), fp32" in text
    assert "kernels ran: block_attention:torch" in text


def test_against_a_config_without_weights_says_so(tmp_path):
    """It said `no weights to import`, of a command that imports nothing."""
    folder = tmp_path / "my model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    res = in_process("verify", folder, "--against", "transformers")
    assert res.returncode == 2
    assert (f"{folder}: a config without weights (*.safetensors or pytorch_model.bin); "
            "--against transformers runs transformers on them "
            f"(`fsc verify '{folder}'` checks its layer plan with seeded weights)"
            ) in one_line(res.stderr)


def test_against_an_import_whose_origin_lost_its_weights_says_so(tmp_path):
    """transformers' own error came through (`Error no file named model.safetensors ...`)."""
    folder, ckpt = tmp_path / "origin", tmp_path / "ck"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    in_process("build", "tiny_attn", "--save", ckpt, "--store", tmp_path / "st", check=0)
    config = json.loads((ckpt / "config.json").read_text())
    config["imported_from"] = f"{folder} (LlamaForCausalLM)"
    (ckpt / "config.json").write_text(json.dumps(config))
    write_checksums(ckpt, list(read_checksums(ckpt)))  # as an import wrote it: listed
    res = in_process("verify", ckpt, "--against", "transformers")
    assert res.returncode == 2
    assert (f"{ckpt} was imported from {folder}, which now has no weights"
            in one_line(res.stderr))


def test_a_nan_is_the_worst_error_wherever_it_stands():
    """Python's max(0.0, nan) is 0.0: the kernels' self-check and accuracy points took the
    largest error that way, so a NaN could pass as exact."""
    import math

    import torch
    from fsc.kernels.points import _accuracy

    from fsc.accuracy import worst_error

    assert math.isnan(worst_error([0.0, math.nan, 1.0])) and worst_error([0.5, 2.0]) == 2.0

    def kernel(x, a, b, new_a, new_b):  # a fold: its second new state written as NaN
        new_a.copy_(x)
        new_b.fill_(math.nan)
        return x

    def ref(x, a, b, new_a, new_b):
        new_a.copy_(x)
        new_b.copy_(x)
        return x

    x = torch.ones(4)
    errs = _accuracy(kernel, ref, (x, torch.zeros(4), torch.zeros(4)), states=(1, 2))
    assert errs["rel_err"] == 0.0 and math.isnan(errs["state_rel_err"])


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_long_check_shows_its_blocks_on_a_terminal(monkeypatch, dtype):
    """A bf16 check of a 3B recipe ran for minutes on a CPU without a word: each block checked,
    the model's then each mixer kind's, is reported, and on a terminal shown as a bar that is
    gone when the check ends; nothing in a log or a pipe."""
    import io

    from rich.console import Console

    seen = []
    verify_lib.verify(load_recipe("tiny_hybrid"), n_blocks=3, dtype=dtype,
                      progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 9) for i in range(1, 10)]  # 3 blocks: the model's, attention's, mamba's
    for terminal in (True, False):
        screen = io.StringIO()
        monkeypatch.setattr("fsc.cli.bars.err", Console(file=screen, force_terminal=terminal,
                                                        width=100))
        res = in_process("verify", "tiny_hybrid", "--blocks", "3", "--dtype", dtype)
        assert res.returncode == 0, res.stderr
        shown = screen.getvalue()
        assert ("checking, blocks" in shown and "9/9" in shown) if terminal else shown == ""
