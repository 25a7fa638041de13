"""`fsc estimate`: JSON keys, one-line errors with exit code 2, and no torch import."""

import json
import subprocess
import sys

import pytest
import typer
from fsc_run import in_process
from typer.testing import CliRunner

from fsc.cli import estimate as estimate_cli

KEYS = {"weight_bytes", "kv_bytes", "state_bytes", "total_bytes", "step_bytes", "step_flops",
        "floor_ms", "bound", "tokens_per_s", "max_batch", "fits"}


@pytest.fixture(scope="module")
def app():
    app = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False)  # as fsc.cli.main

    @app.callback()
    def _root() -> None:
        """Test root, so that estimate stays a subcommand."""

    estimate_cli.register(app)
    return app


def test_json_output_has_the_keys(app):
    res = CliRunner().invoke(app, ["estimate", "hybrid_3b", "--S", "262144", "--B", "8",
                                   "--gpu", "h100", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert KEYS <= doc.keys()
    assert (doc["S"], doc["B"], doc["G"], doc["K"], doc["mode"]) == (262144, 8, 32, 32, "diffusion")
    for key in ("weight_bytes", "kv_bytes", "state_bytes", "total_bytes", "step_bytes"):
        assert isinstance(doc[key], int)
    # hybrid_3b: 5 attention layers · 2 · 262,144 · 20 · 128 · 2 B · 8 sequences = 100 GiB.
    assert doc["kv_bytes"] == 5 * 2 * 262144 * 20 * 128 * 2 * 8 == 100 * 2**30
    assert doc["bound"] == "memory" and doc["fits"] is False and doc["max_batch"] == 5


def test_human_output_and_overrides(app):
    res = CliRunner().invoke(app, ["estimate", "tiny_hybrid", "--mode", "ar", "--gpu", "a100",
                                   "--bandwidth", "1.5", "--memory", "40"])
    assert res.exit_code == 0, res.output
    shown = " ".join(res.stdout.split())  # lines wrap at the console's width
    for text in ("A100 80GB (40.00 GB, 1.5 TB/s, 312 TFLOP/s)", "KV cache at S", "MoE: 4 experts",
                 "step (= fold)", "tokens/s at the floor"):
        assert text in shown
    assert "│ fold " not in res.stdout  # ar: the step is the fold, one row

def test_weights_that_cannot_fit_are_said_so_not_oom_at_S_0(app, monkeypatch):
    from fsc.cli.common import out

    monkeypatch.setattr(out, "width", 200)  # the note whole on its line
    for memory, says in (("1", "the weights alone do not fit"),
                         ("6", "weights, state and activations do not fit at B = 4096")):
        res = CliRunner().invoke(app, ["estimate", "hybrid_3b", "--S", "1024", "--B", "4096",
                                       "--gpu", "h100", "--memory", memory])
        shown = " ".join(res.stdout.split())
        assert res.exit_code == 0 and "runs out at S 0" not in shown, shown
        assert says in shown and "memory runs out │ already" in shown


def test_a_bound_past_fscs_own_says_so(app, monkeypatch):
    """A tiny model's largest batch (158,174) and the S where its memory runs out (167M) are
    memory's, past what --B and --S take: said beside them, not left to a refusal."""
    from fsc.cli.common import out

    monkeypatch.setattr(out, "width", 200)
    shown = " ".join(CliRunner().invoke(app, ["estimate", "tiny_attn", "--S", "1k"]).stdout.split())
    assert "max batch at this S │ 158,174 │ memory's bound; fsc's --B is at most 4,096" in shown
    assert "runs out at S │ 167,032,062 │ at B = 1; fsc's --S is at most 16,777,216" in shown
    shown = " ".join(CliRunner().invoke(app, ["estimate", "attn_3b", "--S", "1k"]).stdout.split())
    assert "max batch at this S │ 260 │ │" in shown and "at most" not in shown


def test_help_text_on_every_option(app):
    res = CliRunner().invoke(app, ["estimate", "--help"])
    assert res.exit_code == 0
    for opt in ("--S", "--B", "--G", "--steps", "--mode", "--gpu", "--bandwidth", "--tflops",
                "--memory", "--json"):
        line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith(opt + " "))
        assert len(line.split()) > 2, f"{opt} has no help text"


def _run_fsc(*args):
    return in_process("estimate", *args)


@pytest.mark.parametrize("args, message", [
    (["tiny_attn", "--S", "-5"], "error: Invalid value for '--S': -5 is below 0"),
    (["tiny_attn", "--S", "4k,8k"], "error: Invalid value for '--S': '4k,8k': one size"),
    (["tiny_attn", "--gpu", "tpu"], "error: unknown GPU 'tpu'"),
])
def test_bad_figures_exit_2_in_one_line(args, message):
    proc = _run_fsc(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(message)


def test_steps_on_an_autoregressive_recipe_suggests_what_runs():
    """`--steps 2` of a G 1 recipe suggested `--mode diffusion`, which then failed (K 2 > G 1);
    the G it suggests takes those steps."""
    proc = _run_fsc("attn_7b", "--steps", "2")  # (a recipe of block size 1)
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "--mode diffusion" not in said, said
    assert "give --G N (at least 2) to decode in blocks of N" in said
    assert _run_fsc("attn_7b", "--G", "2", "--steps", "2").returncode == 0


@pytest.mark.parametrize("args", [
    ["--B", "0"], ["--bandwidth", "0"], ["--tflops", "-1"], ["--memory", "0"], ["--G", "0"],
    ["--steps", "0"], ["--mode", "ar", "--G", "4"], ["--mode", "sideways"],
])
def test_more_bad_figures_through_the_boundary(monkeypatch, capsys, args):
    from fsc.cli.main import run

    monkeypatch.setattr(sys, "argv", ["fsc", "estimate", "tiny_attn", *args])
    with pytest.raises(SystemExit) as exit_info:
        run()
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1


def test_no_torch_import_and_70b_answers():
    code = """
import sys
from fsc.costmodel import estimate, predict_point, fits, device_spec
from fsc.recipe import load_recipe, parse_recipe
big = parse_recipe({"name": "llama70b_like", "d_model": 8192, "n_layers": 80, "vocab_size": 128256,
    "layers": {"default": "attention"},
    "attention": {"n_heads": 64, "n_kv_heads": 8, "head_dim": 128}, "mlp": {"hidden_ratio": 5.25}})
e = estimate(big, S=131072, B=4, gpu="NVIDIA H200")
e.to_dict()
predict_point(big, 131072, 4, 1, 1, device_spec("h100"))
fits(load_recipe("hybrid_3b"), 262144, 8, 32, 80 * 10**9)
assert "torch" not in sys.modules, "the cost model imported torch"
print(e.params["total"])
"""
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # 80 · (q, o 8192·8192·2 + k, v 8192·1024·2 + MLP 2·8192·43008 + norms 2·8192)
    #   + embed and head 2·128256·8192 + final norm 8192
    assert int(proc.stdout) == 70_553_706_496


ESTIMATE_BAD = [  # (options, what the one line must name)
    (["--memory", "1e-30"], ["--memory", "1e-30"]),
    (["--memory", "nan"], ["--memory", "nan"]),
    (["--bandwidth", "nan"], ["--bandwidth", "nan"]),
    (["--bandwidth", "inf"], ["--bandwidth", "inf"]),
    (["--bandwidth", "1e-30"], ["--bandwidth", "1e-30"]),
    (["--tflops", "inf"], ["--tflops", "inf"]),
    (["--tflops", "0"], ["--tflops", "0"]),
    (["--B", "1e9"], ["--B", "1e9"]),
    (["--B", "5000"], ["--B", "5000"]),
    (["--S", "99999999"], ["--S", "99999999"]),
    (["--steps", "99"], ["--steps 99", "G = 4"]),
    (["--G", "8", "--steps", "9"], ["--steps 9", "G = 8"]),
    (["--G", "5000"], ["--G", "5000"]),  # a size, as --B: 1k is 1024
    (["--mode", "ar", "--G", "4"], ["--mode ar", "--G"]),
    (["--mode", "ar", "--steps", "2"], ["--mode ar", "--steps"]),
]


@pytest.mark.parametrize("args, names", ESTIMATE_BAD, ids=[" ".join(a) for a, _ in ESTIMATE_BAD])
def test_bad_values_name_option_and_value(capsys, args, names):
    from fsc.cli.main import main

    assert main(["estimate", "tiny_attn", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ")
    assert captured.err.count("\n") == 1 and all(n in captured.err for n in names), captured.err


def test_names_with_markup_print_as_themselves(tmp_path, capsys):
    from fsc.cli.main import main
    from fsc.recipe import load_recipe

    recipe = load_recipe("tiny_attn").to_yaml().replace("name: tiny_attn", "name: '[/bold]x[red]'")
    path = tmp_path / "odd.yaml"
    path.write_text(recipe)
    assert main(["estimate", str(path), "--gpu", "[/]gpu\x1b[31m", "--bandwidth", "1",
                 "--tflops", "10", "--memory", "8"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("[/bold]x[red]") and "[/]gpu\\x1b[31m" in first


def test_sizes_take_k_and_m_as_everywhere(app):
    for cmd, option, value in (("estimate", "--S", "256K"), ("build", "--S", "256k"),
                               ("estimate", "--B", "1k")):
        res = in_process(cmd, "hybrid_3b", option, value, "--json")
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc.get("cache", doc)[option[2:]] == 2**10 * int(value[:-1])
    res = in_process("decode", "tiny_attn", "--mode", "ar", "--length", "1k", "--json")
    assert res.returncode == 0, res.stderr  # (random weights may end at EOS before 1,024)
    from fsc.cli.bounds import size

    assert size(1, 2**20, "--length")("1k") == 1024


def test_train_and_verify_take_sizes_too():
    """--seq-len 1k reads as 1,024 (the run then lacks only --out); --length 2m as 2,097,152,
    above what verify decodes."""
    res = in_process("train", "tiny_attn", "--data", "copy", "--seq-len", "1k",
                     "--train-steps", "1")
    assert res.returncode == 2 and "fsc train needs --out" in res.stderr, res.stderr
    res = in_process("verify", "tiny_attn", "--length", "2m")
    assert res.returncode == 2 and "2097152 is above 1048576" in res.stderr, res.stderr


def test_a_g1_recipe_is_estimated_autoregressively(app, tmp_path):
    """Every published model is G = 1: ar by default, as fsc decode decodes it, and no
    meaningless comparison with a G = 1 'diffusion' ('while K < 0')."""
    llama = "recipes/published/Llama-3.1-8B"
    doc = json.loads(CliRunner().invoke(app, ["estimate", llama, "--S", "262144", "--B", "8",
                                              "--json"]).stdout)
    ar = json.loads(CliRunner().invoke(app, ["estimate", llama, "--S", "262144", "--B", "8",
                                             "--mode", "ar", "--json"]).stdout)
    assert doc["mode"] == "ar" and doc["tokens_per_s"] == ar["tokens_per_s"]
    shown = CliRunner().invoke(app, ["estimate", llama, "--S", "262144", "--B", "8"]).stdout
    assert "K < 0" not in shown and "K = 0" not in shown
    assert "no block-diffusion comparison" in shown
    block = json.loads(CliRunner().invoke(app, ["estimate", "hybrid_3b", "--json"]).stdout)
    assert block["mode"] == "diffusion"  # a G > 1 recipe keeps diffusion


@pytest.mark.parametrize("mode", [[], ["--mode", "diffusion"], ["--mode", "ar"]])
def test_no_comparison_with_a_g1_diffusion_is_given_in_any_mode(mode):
    """--json too: a G = 1 'diffusion' is no comparison (its crossovers are K < 0)."""
    args = ["estimate", "published/Llama-3.1-8B", "--S", "64k", *mode]
    doc = json.loads(in_process(*args, "--json", check=0).stdout)
    assert doc["comparison"] is None
    shown = in_process(*args, check=0).stdout
    assert "K < " not in shown and "no block-diffusion comparison" in shown
    with_G = json.loads(in_process(*args[:4], "--G", "8", "--json", check=0).stdout)
    assert with_G["comparison"]["sweep_crossover_steps"] == 7


def test_an_unknown_gpu_name_is_refused_not_matched_by_a_prefix(app):
    from fsc.costmodel.devices import device_spec

    res = in_process("estimate", "hybrid_3b", "--gpu", "h1000")
    assert res.returncode == 2 and "unknown GPU 'h1000'; known: h100, h200, a100" in res.stderr
    assert device_spec("h1000") is None and device_spec("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert device_spec("NVIDIA A100-SXM4-80GB").name == "A100 80GB"


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_every_line_fits_80_columns(run_fsc):
    """The header and the lines under the tables wrap at the terminal's width, as the tables
    do."""
    import os

    for recipe in ("hybrid_3b", "tiny_hybrid"):  # tiny_hybrid: the MoE line too
        res = run_fsc("estimate", recipe, env={**os.environ, "COLUMNS": "80"}, check=0)
        lines = res.stdout.splitlines()
        assert max(len(ln) for ln in lines) <= 80, max(lines, key=len)
        assert "TFLOP/s)" in res.stdout and "sweeps the weights less often" in res.stdout
