import json
import subprocess
import sys

import pytest

COMMANDS = ["recipes", "build", "decode", "verify", "profile", "query", "runs", "schema",
            "estimate", "push", "pull", "artifacts"]


def test_help_does_not_import_torch():
    """Nor the recipe schema, pydantic and YAML (`fsc eval --help` names the weight-free
    fields from fsc.recipe_fields): they took `fsc --help` from about 0.2 s to 0.5 s."""
    code = ("import sys\nfrom typer.testing import CliRunner\nfrom fsc.cli.main import app\n"
            "r = CliRunner().invoke(app, ['--help'])\nassert r.exit_code == 0, r.output\n"
            "print(sorted(m for m in ('torch', 'duckdb', 'triton', 'yaml', 'pydantic', 'fsc.recipe') "
            "if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    from typer.testing import CliRunner

    from fsc.cli.main import app

    r = CliRunner().invoke(app, [command, "--help"])
    assert r.exit_code == 0, r.output
    assert "Usage" in r.output and len(r.output.splitlines()) > 4


def test_an_optional_argument_reads_so_in_the_usage_line_under_any_typer():
    """`fsc report [[RUN]...]...` (newer typers add brackets and dots to its metavar) or
    `fsc report RUN`, which reads as required (older ones write it as it is)."""
    from fsc_run import in_process

    assert "Usage: fsc report [OPTIONS] [RUN]...\n" in in_process("report", "--help").stdout
    shown = in_process("decode", "--help").stdout  # a required one stays bare (or braced)
    assert any(f"Usage: fsc decode [OPTIONS] {name}\n" in shown for name in ("SOURCE", "{SOURCE}"))


def _shown_options():
    """(command, option, help) of every option that some `fsc ... --help` shows."""
    import typer.main

    from fsc.cli.main import app

    for name, cmd in typer.main.get_command(app).commands.items():
        subs = getattr(cmd, "commands", None) or {None: cmd}
        for sub_name, sub in subs.items():
            where = " ".join(n for n in (name, sub_name) if n)
            for p in sub.params:
                if not getattr(p, "hidden", False):
                    yield from ((where, opt, p.help or "") for opt in p.opts if opt[:2] == "--")


def test_steps_is_K_wherever_it_is_shown():
    """--steps is K, the denoising steps per block, in every command that shows it; fsc train's
    optimizer steps are --train-steps (its old --steps is hidden)."""
    from typer.testing import CliRunner

    from fsc.cli.main import app

    shown = {where: text for where, opt, text in _shown_options() if opt == "--steps"}
    assert {"decode", "estimate", "eval", "profile"} <= shown.keys(), shown
    assert all(text.startswith("Denoising steps K per block") for text in shown.values()), shown
    assert [w for w, opt, _ in _shown_options() if opt == "--train-steps"] == ["train"]
    r = CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "--train-steps" in r.output and "--steps" not in r.output


def test_build_json(fsc_cli):
    res = fsc_cli("build", "hybrid_3b", "--S", "262144", "--B", "8", "--json", check=0)
    d = json.loads(res.stdout)
    for key in ("name", "recipe_hash", "n_layers", "layer_plan", "n_params", "weight_bytes", "cache"):
        assert key in d
    assert d["layer_plan"].count("attention") == 5 and d["built_on"] == "meta"
    c = d["cache"]
    # 5 attention layers × 2 (K, V) × S × B × 20 heads × 128 × 2 bytes (bf16)
    assert c["kv_bytes"] == 5 * 2 * 262144 * 8 * 20 * 128 * 2
    assert list(c) == ["S", "B", "kv_bytes", "state_bytes", "total_bytes"]
    assert c["total_bytes"] == c["kv_bytes"] + c["state_bytes"]


def test_decode_json_and_no_cache_agree(fsc_cli):
    a = json.loads(fsc_cli("decode", "tiny_hybrid", "--prompt", "abc", "--length", "10", "--json",
                           check=0).stdout)
    b = json.loads(fsc_cli("decode", "tiny_hybrid", "--prompt", "abc", "--length", "10", "--json",
                           "--no-cache", check=0).stdout)
    assert set(a) >= {"text", "token_ids", "stats"}
    assert a["token_ids"] == b["token_ids"] and len(a["token_ids"]) == 10
    assert a["stats"]["forward_passes"] > 0 and "tokens_per_s" in a["stats"]


def test_verify_json(fsc_cli):
    d = json.loads(fsc_cli("verify", "tiny_hybrid", "--json", check=0).stdout)
    assert d["exact"] is True and set(d["max_abs_err"]) == {"model", "mamba", "attention"}
    assert all(c["exact"] for c in d["checks"])


def test_verify_reduces_large_recipes(fsc_cli):
    d = json.loads(fsc_cli("verify", "linear_24_8", "--G", "2", "--B", "1", "--blocks", "2", "--json",
                           check=0).stdout)
    assert d["reduced_width"] is True and d["exact"] is True
    assert set(d["max_abs_err"]) == {"model", "linear", "attention"}


@pytest.mark.parametrize("args, msg", [
    (["decode", "tiny_attn", "--steps", "9"], "steps 9"),
    (["build", "tiny_attn", "--S", "-1"], "'--S': -1 is below 0"),
    (["verify", "tiny_attn", "--G", "1"], "needs G > 1"),
    (["decode", "nope_recipe"], "no such recipe"),
    (["decode", "tiny_attn", "--backend", "cuda"], "'--backend': 'cuda' is not one of"),
    (["decode", "tiny_attn", "--device", "banana"], "is not a device"),
    (["verify", "tiny_attn", "--device", "cuda:7"], "--device cuda:7"),
    (["decode", "tiny_attn", "--G", "0"], "G 0 must be at least 1"),
    (["decode", "tiny_attn", "--steps", "0"], "steps 0"),
    # one wording for a value that is not a number, whichever typer parses it
    (["decode", "tiny_attn", "--seed", "x"], "Invalid value for '--seed': 'x' is not a whole "
                                             "number (see `fsc decode --help`)"),
    (["estimate", "tiny_attn", "--G", "8,16"], "'--G': '8,16': one size, e.g. 4096 or 4k"),
    (["decode", "tiny_attn", "--temperature", "warm"], "'--temperature': 'warm' is not a "
                                                       "number"),
])
def test_bad_arguments_are_one_line(fsc_cli, args, msg):
    res = fsc_cli(*args)
    assert res.returncode != 0 and msg in res.stderr and "Traceback" not in res.stderr


def test_checkpoint_directory_wherever_a_recipe_goes(fsc_cli, tmp_path):
    ck = tmp_path / "ck"
    fsc_cli("build", "tiny_mamba", "--save", ck, "--seed", "4", "--store", tmp_path / "st", check=0)
    d = json.loads(fsc_cli("verify", ck, "--json", check=0).stdout)
    assert d["exact"] is True and d["weights"] == f"checkpoint {ck}"
    a = json.loads(fsc_cli("decode", ck, "--prompt", "x", "--length", "6", "--json", check=0).stdout)
    b = json.loads(fsc_cli("decode", "tiny_mamba", "--seed", "4", "--prompt", "x", "--length", "6",
                           "--json", check=0).stdout)
    assert a["token_ids"] == b["token_ids"]  # the saved weights are the seeded ones
    p = json.loads(fsc_cli("profile", "-r", ck, "--S", "16", "--B", "1", "--warmup", "0", "--repeats",
                           "1", "--store", tmp_path / "st", "--json", check=0).stdout)
    assert [x["status"] for x in p["points"]] == ["ok"] and p["points"][0]["recipe"] == "tiny_mamba"


def test_decode_refuses_weights_that_cannot_fit(fsc_cli, tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("name: big\nd_model: 16384\nn_layers: 200\nvocab_size: 256000\n"
                   "layers: {default: attention}\nattention: {n_heads: 128}\n")
    res = fsc_cli("decode", big, "--prompt", "hi")
    assert res.returncode == 2 and "weights need" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("args, code, where", [
    ([], 0, "stdout"),  # bare fsc: the help
    (["build", "nope_recipe"], 2, "stderr"),  # a library error
    (["build", "tiny_attn", "--S", "abc"], 2, "stderr"),  # a usage error of typer's click
    (["nonsense"], 2, "stderr"),
])
def test_the_process_boundary(run_fsc, args, code, where):
    """A handful through a real process: the exit status and one line, never a traceback."""
    res = run_fsc(*args)
    assert res.returncode == code and "Traceback" not in res.stderr + res.stdout
    if where == "stderr":
        assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith("error: ")
        assert res.stdout == ""
    else:
        assert "Usage" in res.stdout and res.stderr == ""


@pytest.mark.parametrize("args", [["schema"], ["query", "select * from range(200000)",
                                              "--format", "csv"]])
def test_a_reader_that_leaves_early_ends_quietly(args, tmp_path):
    """`fsc schema | head -1`: the pipe closes under fsc; it ends with exit 0 and no message
    (rich and click would exit 1)."""
    import subprocess
    import sys

    fsc = subprocess.list2cmdline([sys.executable, "-m", "fsc", *args, "--store",
                                   str(tmp_path)])
    if args[0] == "query":
        from fsc.store import Store

        Store(tmp_path).migrate()
    res = subprocess.run(["bash", "-c", f"{fsc} | head -1 >/dev/null; echo ${{PIPESTATUS[0]}}"],
                         capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "0" and "Traceback" not in res.stderr, res.stderr


_IN_ONE_PROCESS = """
import io, json, sys
from contextlib import redirect_stdout
from fsc.cli.main import main
for args in json.loads(sys.argv[1]):
    with redirect_stdout(io.StringIO()) as out:
        code = main(args)
    print(json.dumps([code, out.getvalue()]))
"""


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_what_a_machine_reads_is_never_wrapped_or_styled(tmp_path):
    """At a narrow colour terminal (COLUMNS=60, FORCE_COLOR) a recipe's YAML, every --json
    document and a written file's path come out exactly as they are: `fsc import ... > r.yaml`
    builds, `f=$(fsc report ...)` names the file written."""
    import yaml

    from fsc.recipe import shipped_dir
    from fsc.store import Store

    store = tmp_path / "store"
    Store(store).start_run("eval", "fsc eval", None, {})
    page = tmp_path / "a:cat: [bold]report.html"
    calls = [["import", "recipes/published/Qwen3-8B"],
             ["import", "recipes/published/Qwen3-8B", "--json"],
             ["estimate", "published/Llama-3.1-8B", "--json"], ["recipes", "--json"],
             ["schema", "--json", "--store", str(store)], ["runs", "--json", "--store", str(store)],
             ["report", "latest", "--store", str(store), "--out", str(page)]]
    env = {**__import__("os").environ, "COLUMNS": "60", "FORCE_COLOR": "1",
           "TERM": "xterm-256color"}
    res = subprocess.run([sys.executable, "-c", _IN_ONE_PROCESS, json.dumps(calls)], env=env,
                         cwd=shipped_dir().parent, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    results = [json.loads(line) for line in res.stdout.splitlines()]
    assert [code for code, _ in results] == [0] * len(calls), res.stderr
    recipe_yaml, *docs, shown = (text for _, text in results)
    published = shipped_dir() / "published" / "Qwen3-8B.yaml"
    assert recipe_yaml == published.read_text() and yaml.safe_load(recipe_yaml)["name"]
    assert all(json.loads(text) is not None for text in docs)
    assert shown == f"{page}\n" and page.exists()


def test_the_consoles_show_text_as_it_is():
    """A decoded text, a recipe or a path holding :cat: or [bold] is shown, not obeyed."""
    from fsc.cli.common import err, out

    for console in (out, err):
        with console.capture() as shown:
            console.print("a :cat: [bold]b[/bold]", highlight=False)
        assert shown.get() == "a :cat: [bold]b[/bold]\n"


def test_help_lists_every_command_whole_at_80_columns(run_fsc):
    """`fsc --help` gives each command a summary of its own, never cut with '...'."""
    import os

    from fsc.cli.main import SUMMARIES, app

    res = run_fsc("--help", env={**os.environ, "COLUMNS": "80"}, check=0)
    listed = res.stdout.split("Commands:")[1].strip().splitlines()
    names = {i.name for i in app.registered_commands} | {g.name for g in app.registered_groups}
    assert names == set(SUMMARIES) and len(listed) == len(names)
    for line in listed:
        assert not line.rstrip().endswith("...") and len(line) <= 80, line
