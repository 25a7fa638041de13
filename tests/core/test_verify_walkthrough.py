"""`fsc verify` as a new user meets it: the options that cannot go together, the backend a
machine cannot run, what the output says of a reduced check, and the default run past a
sliding window; and `tools.gpucheck --dry-run` as docs/kernels.md shows it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fsc_run import in_process

from fsc.recipe import load_recipe
from fsc.verify_report import WINDOW_TOKENS, plan

ROOT = Path(__file__).parents[2]


def one_line(text: str) -> str:
    return " ".join(text.split())


def test_backend_triton_on_the_cpu_without_the_interpreter_is_refused(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET")
    res = in_process("verify", "tiny_attn", "--backend", "triton")
    assert res.returncode == 2, res.stderr
    assert "--backend triton needs a CUDA device, not cpu" in one_line(res.stderr)
    assert res.stderr.count("\n") == 1 and res.stdout == ""


@pytest.mark.parametrize("extra, named", [
    (["--G", "8", "--dtype", "bf16"], "--G, --dtype"),
    (["--B", "2"], "--B"),  # given, even at its default
    (["--blocks", "4"], "--blocks"),
    (["--length", "64"], "--length"),
    (["--device", "cpu", "--backend", "torch"], "--backend, --device"),
])
def test_against_refuses_the_options_of_the_exactness_check(extra, named):
    res = in_process("verify", "tiny_attn", "--against", "transformers", *extra)
    assert res.returncode == 2
    assert f"{named} cannot go with --against" in one_line(res.stderr)
    assert res.stderr.count("\n") == 1


def test_against_takes_a_seed_or_prompt_ids_not_both():
    res = in_process("verify", "tiny_attn", "--against", "transformers", "--seed", "3",
                     "--prompt-ids", "1,2")
    assert res.returncode == 2
    assert "give it or --prompt-ids, not both" in one_line(res.stderr)


def test_g_help_says_an_autoregressive_recipe_keeps_g_1():
    res = in_process("verify", "--help")
    assert "in fp32 at least 2 for a denoiser" in one_line(res.stdout)


def test_a_reduced_check_says_why_and_with_what_weights():
    res = in_process("verify", "linear_24_8", "--G", "2", "--B", "1", "--blocks", "2")
    assert res.returncode == 0, res.stderr
    text = one_line(res.stdout)
    assert ("linear_24_8 has more than 512 MiB of fp32 weights: checked the same layer plan at "
            "d_model 256 (linear_24_8@d256) with seeded weights") in text
    assert "this machine" not in text


@pytest.mark.parametrize("window", [32, 4000, 4064, 4090, WINDOW_TOKENS])
@pytest.mark.parametrize("G", [4, 32, 1024])
def test_the_default_run_passes_a_window_up_to_window_tokens(window, G):
    """The last block reads a cache that has dropped keys: it starts after `window` tokens."""
    recipe = load_recipe("passkey_hybrid_swa")
    recipe = recipe.model_copy(
        update={"attention": recipe.attention.model_copy(update={"window": window})})
    G, blocks = plan(recipe, "fp32", G)
    assert (blocks - 1) * G > window


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_verify_of_a_4096_window_runs_past_it(tmp_path):
    path = tmp_path / "swa.yaml"
    path.write_text("name: swa\nd_model: 32\nn_layers: 1\nvocab_size: 64\nblock_size: 4\n"
                    "layers: {default: attention}\nattention: {n_heads: 2, head_dim: 16, "
                    "window: 4096}\nmlp: {hidden_ratio: 2}\n")
    res = in_process("verify", path, "--G", "1024", "--B", "1", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["blocks"] == 6 and doc["exact"] is True  # the sixth starts at 5120 > 4096


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_gpucheck_can_still_turn_the_interpreter_on_after_its_imports(tmp_path):
    """`python -m tools.gpucheck --dry-run` sets TRITON_INTERPRET in main(), after its module
    imported fsc.kernels.points: that import must not have decorated a kernel yet."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    script = ("import os, torch, tools.gpucheck\n"
              "os.environ['TRITON_INTERPRET'] = '1'\n"
              "from fsc.kernels.points import SHAPES_DRY, attention_points\n"
              "gen = torch.Generator().manual_seed(0)\n"
              "p = attention_points(1, 5, SHAPES_DRY, torch.float32, 'cpu', gen)[0]\n"
              "print(p.accuracy()['rel_err'])\n")
    res = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    assert float(res.stdout) < 1e-4


def test_the_table_says_whose_weights_it_checked(tmp_path):
    """Only --json said which weights were checked; a checkpoint's check read as a recipe's."""
    ckpt = tmp_path / "ck"
    in_process("build", "tiny_attn", "--save", ckpt, "--store", tmp_path / "st", check=0)
    said = " ".join(in_process("verify", ckpt, "--blocks", "2", check=0).stdout.split())
    assert f"weights: checkpoint {ckpt}" in said
    said = " ".join(in_process("verify", "tiny_attn", "--blocks", "2", check=0).stdout.split())
    assert "weights: seeded" in said
