"""Every bad command-line value gets one line on stderr and exit 2: never a traceback, never a
hang. Cases are generated from a table of each command's options and the kinds of value they
take; a test checks the table covers every option fsc has, so a new option cannot skip it."""

import contextlib
import json
import signal

import pytest
import typer.main

from fsc.cli.main import app, main
from fsc.cli.usage import _takes_path

# Kinds of value and the bad values each is fed.
BAD = {
    "int": ["abc", "1.5", "1e9", "", "0x10", "99999999999999999999999999"],
    "int_pos": ["0", "-1", "abc", "", "1e9", "99999999999999999999999999"],
    "int_nonneg": ["-1", "abc", "", "99999999999999999999999999"],
    "float_pos": ["nan", "inf", "-inf", "0", "-1", "abc", ""],
    "float_nonneg": ["nan", "inf", "-1", "abc"],
    "unit": ["nan", "inf", "0", "-0.5", "1.5", "abc"],  # (0, 1]
    "unit_closed": ["nan", "inf", "-0.5", "1.5", "abc", ""],  # [0, 1]
    "choice": ["foo", "", "AUTO!"],
    "sizes": ["", ",", "abc", "1k,x", "-4", "1e9", "4096k,99999999999"],
    "device": ["banana", "tpu", "cuda:99", "cuda:x", ""],
    "out_file": ["/nonexistent-dir/x.json", "/proc/fsc-x.json"],
    "out_dir": ["/proc/fsc-x", "/etc/passwd"],
    "recipe": ["nope_recipe", "/etc/passwd", "/dev/null", "/nonexistent/r.yaml", ""],
    "seed": ["-1", "1e23", "99999999999999999999999", "abc"],
    "repo": ["", "a/b/c", "noslash", "../x", "a b/c", "-x/y"],
    "revision": ["", "a..b", "x\ny", "-x", "a b", "x:y"],
    "data": ["nope", "/nonexistent/x.txt", "/etc/passwd", "x.csv", "", "hf"],
    "in_dir": ["/nonexistent-dir", "/etc/passwd", ""],
    "in_file": ["/nonexistent/x.txt", "/dev/null", "/etc", ""],
    "depths": ["", "abc", "-0.1", "1.5", "nan", "0,,1"],
    "address": ["nowhere", "", "ray://", "host:99999999"],
    "ids": ["", "abc", "1,,2", "-1", "1;2", "99999999999999999999"],
    "set": ["", "x", "=3", "d_model=8", "attention.logn=1", "attention.logn=abc",
            "state_dtype=fp8", "mamba.decay_scale=-1", "attention.window=[1]",
            "mamba.decay_power=0.5", "mamba.decay_from=0", "mamba.max_half_life=-2",
            "mamba.max_half_life=inf"],
    "kinds": [",", "mamba", "", "attention,attention", "ATTENTION", "attention;rm"],
    "where": ["", "  ", "1=1; drop table runs", "B = 1) union select 1 where (1", "select",
              "B = "],
}

CKPT = "{checkpoint}"  # stands for a checkpoint directory the tests make
CONFIG = "{config}"  # stands for a published model's folder (config.json alone)
# command -> (arguments that make the rest valid, {option: kind}); options not listed here are
# flags, free text, or checked elsewhere (see NOT_FUZZED).
COMMANDS = {
    "build": (["tiny_attn"], {"--S": "int_nonneg", "--B": "int_pos", "--save": "out_dir",
                              "--seed": "seed"}),
    "decode": (["tiny_attn"], {
        "--length": "int_pos", "--G": "int_pos", "--steps": "int_pos", "--mode": "choice",
        "--temperature": "float_nonneg", "--top-p": "unit", "--top-k": "int_nonneg",
        "--min-p": "unit_closed", "--threshold": "unit", "--policy": "choice", "--repetition-penalty": "float_pos",
        "--seed": "seed", "--backend": "choice", "--device": "device", "--prompt-ids": "ids",
        "--prompt-file": "in_file", "--prompts": "in_file", "--batch": "int_pos",
        "--prefill-chunk": "int_nonneg"}),
    "verify": (["tiny_attn"], {"--G": "int_pos", "--B": "int_pos", "--blocks": "int_pos",
                               "--length": "int_pos", "--against": "choice",
                               "--prompt-ids": "ids",
                               "--seed": "seed", "--backend": "choice", "--device": "device",
                               "--dtype": "choice"}),
    "profile": (["-r", "tiny_attn", "--S", "16", "--B", "1"], {
        "--recipe": "recipe", "--S": "sizes", "--B": "sizes", "--G": "sizes", "--steps": "sizes",
        "--mode": "choice", "--dtype": "choice", "--backend": "choice", "--warmup": "int_nonneg",
        "--repeats": "int_pos", "--device": "device", "--memory-budget": "float_pos",
        "--bandwidth": "float_pos", "--seed": "seed", "--resume": "choice",
        "--executor": "choice", "--workers": "int_pos", "--address": "address",
        "--retries": "int_nonneg", "--slurm-gpus-per-node": "int_nonneg",
        "--slurm-time": "int_pos"}),
    "estimate": (["tiny_attn"], {
        "--S": "int_nonneg", "--B": "int_pos", "--G": "int_pos", "--steps": "int_pos",
        "--mode": "choice", "--gpu": "choice", "--bandwidth": "float_pos", "--tflops": "float_pos",
        "--memory": "float_pos"}),
    "import": ([CONFIG], {"--out": "out_file"}),
    "query": (["select 1"], {"--format": "choice", "--out": "out_file"}),
    "export": (["select 1"], {"--out": "out_file"}),
    "runs": ([], {"--limit": "int_pos", "--status": "choice", "--kind": "choice"}),
    "push": ([CKPT, "--repo", "alice/tiny"], {"--repo": "repo", "--revision": "revision"}),
    "pull": (["alice/tiny"], {"--dir": "out_dir"}),
    "train": (["tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "1",
               "--out", "o"], {
        "--data": "data", "--seq-len": "int_pos", "--train-steps": "int_pos", "--G": "int_pos",
        "--steps": "int_pos", "--out": "out_dir",
        "--objective": "choice", "--weighting": "choice", "--batch": "int_pos",
        "--accum": "int_pos", "--lr": "float_pos", "--warmup": "int_nonneg",
        "--weight-decay": "float_nonneg", "--grad-clip": "float_nonneg", "--seed": "seed",
        "--device": "device", "--dtype": "choice", "--train-backend": "choice",
        "--save-every": "int_nonneg",
        "--eval-every": "int_nonneg", "--log-every": "int_pos", "--needle-digits": "int_pos",
        "--pairs": "int_pos", "--resume": "in_dir", "--stop-after": "int_pos",
        "--nproc": "int_pos", "--save-minutes": "float_nonneg", "--keep": "int_nonneg",
        "--stop-at": "unit", "--anneal": "int_nonneg", "--needles": "int_pos",
        "--distractors": "int_nonneg", "--hops": "int_pos", "--chains": "int_pos",
        "--words": "int_pos", "--haystack": "choice", "--template": "choice", "--freeze": "kinds"}),
    "eval": ([CKPT], {
        "--task": "choice", "--lengths": "sizes", "--depths": "depths", "--pairs": "sizes",
        "--samples": "int_pos", "--steps": "int_pos", "--mode": "choice", "--batch": "int_pos",
        "--data": "data", "--needle-digits": "int_pos", "--seed": "seed", "--device": "device",
        "--executor": "choice", "--workers": "int_pos", "--address": "address",
        "--retries": "int_nonneg", "--slurm-gpus-per-node": "int_nonneg",
        "--slurm-time": "int_pos", "--scorer": "recipe", "--G": "sizes", "--policy": "choice",
        "--threshold": "unit", "--temperature": "float_nonneg", "--top-p": "unit",
        "--top-k": "int_nonneg", "--min-p": "unit_closed", "--repetition-penalty": "float_pos",
        "--prompt-length": "int_nonneg", "--ngram": "int_pos", "--resume": "choice",
        "--include-path": "in_dir", "--limit": "int_pos", "--num-fewshot": "int_nonneg",
        "--mc-samples": "int_pos", "--max-length": "int_pos", "--output-path": "out_dir",
        "--variant": "choice",
        "--needles": "int_pos", "--distractors": "int_nonneg", "--hops": "int_pos",
        "--chains": "int_pos", "--words": "int_pos", "--haystack": "choice", "--template": "choice",
        "--export": "out_dir", "--set": "set"}),
    "plot": (["latency"], {"--out": "out_file", "--metric": "choice", "--where": "where"}),
    "report": ([], {"--out": "out_file", "--format": "choice"}),
    "compare": (["run-a", "run-b"], {"--fail-above": "float_pos"}),
}
# Options whose every value is valid, or that only switch behaviour.
NOT_FUZZED = {"--json", "--help", "--store", "--prompt", "--no-cache", "--tokenizer", "--force",
              "--write", "--yes", "--markdown", "--dry-run", "--recipe", "--version", "--private",
              "--message", "--text-field", "--run", "--baseline",
              "--slurm-partition", "--name", "--recipe-only", "--wide", "--supervise-needle",
              "--state-passing", "--mauve", "--tasks", "--logit-shift", "--no-graphs", "--csv",
              "--log-samples"}


def _cases():
    for command, (base, options) in COMMANDS.items():
        for option, kind in options.items():
            for i, value in enumerate(BAD[kind]):
                # the positional argument itself, when fuzzed, replaces the base one
                args = [command, *base, option, value]
                if option == "--recipe" and command != "profile":
                    continue
                # make test feeds every option its kind's first bad value; the rest are slow
                yield pytest.param(args, option, id=f"{command} {option} {value!r}",
                                   marks=() if i == 0 else pytest.mark.slow)
    for command, (base, _) in COMMANDS.items():
        yield pytest.param([command, *base, "--no-such-option"], "--no-such-option",
                           id=f"{command} unknown option")
    for ref in BAD["recipe"]:
        for command in ("build", "decode", "verify", "estimate", "import"):
            yield pytest.param([command, ref], None, id=f"{command} recipe {ref!r}")
    for args in (["nonsense"], ["build"], ["decode"], ["query"], ["build", "a", "b"],
                 ["decode", "tiny_attn", "--mode", "ar", "--G", "4"],
                 ["decode", "tiny_hybrid", "--steps", "5"],
                 ["profile", "-r", "tiny_hybrid", "--S", "16", "--G", "4", "--steps", "99"],
                 ["estimate", "tiny_hybrid", "--G", "4", "--steps", "99"],
                 ["profile", "-r", "tiny_attn", "--mode", "ar", "--G", "4"],
                 ["query", ""], ["query", ";"], ["query", "select from where"],
                 ["runs", "rm", "no-such-run", "--yes"],
                 ["train", "tiny_attn", "--data", "copy", "--seq-len", "30",
                  "--train-steps", "1", "--out", "o"],
                 ["train", "tiny_attn", "--data", "passkey", "--seq-len", "64",
                  "--train-steps", "1", "--out", "o"],
                 ["train", "tiny_attn", "--data", "copy", "--seq-len", "32",
                  "--train-steps", "0", "--out", "o"],
                 ["train", "tiny_attn", "--data", "copy", "--seq-len", "32"],
                 ["train", "--resume", "o", "--lr", "1"],
                 ["train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "1",
                  "--out", "o", "--device", "cpu", "--dtype", "bf16"],
                 ["eval", "tiny_attn", "--lengths", "64"],
                 ["eval", "tiny_attn", "--lengths", "130"],
                 ["eval", "tiny_attn", "--task", "loss"],
                 ["eval", "tiny_attn", "--task", "mqar", "--pairs", "600", "--lengths", "256"],
                 ["eval", "tiny_attn", "--lengths", "16m"],
                 ["eval", "tiny_attn", "--task", "genppl", "--data", "shakespeare"],
                 ["eval", "tiny_attn", "--task", "genppl", "--data", "shakespeare",
                  "--scorer", "tiny_attn"],
                 ["eval", "tiny_attn", "--task", "genppl", "--data", "copy", "--scorer",
                  "tiny_attn"],
                 ["plot"], ["plot", "nope"], ["plot", "latency", "--out", "x.jpg"],
                 ["compare", "run-a"],
                 ["profile", "-r", "tiny_attn", "--address", "local"],
                 ["profile", "-r", "tiny_attn", "--executor", "ray", "--address", "bad"],
                 ["train", "tiny_attn", "--data", "copy", "--seq-len", "32", "--train-steps", "1",
                  "--out", "o", "--nproc", "2", "--device", "cuda"],
                 ["report", "--format", "md", "--out", "x.html"], ["report", "--out", "r.pdf"]):
        yield pytest.param(args, None, id=" ".join(args) or "(empty)")


class _Hang(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: int):
    def fire(*_):
        raise _Hang(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FSC_STORE", str(tmp_path / "store"))
    monkeypatch.delenv("FSC_DEBUG", raising=False)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "ckpt"
    assert main(["build", "tiny_attn", "--save", str(path),
                 "--store", str(path.parent / "store")]) == 0
    return str(path)


@pytest.fixture(scope="module")
def config_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "published"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100}))
    return str(path)


@pytest.mark.parametrize("args, option", list(_cases()))
def test_bad_input_is_one_line_and_exit_2(args, option, capsys, in_tmp, request):
    if CKPT in args:
        args = [request.getfixturevalue("checkpoint") if a == CKPT else a for a in args]
        capsys.readouterr()
    if CONFIG in args:
        args = [request.getfixturevalue("config_dir") if a == CONFIG else a for a in args]
    with _deadline(20):
        code = main(args)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, (code, captured.err[-2000:], captured.out[-500:])
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err[-2000:]
    assert "Traceback" not in captured.err and len(lines[0]) <= 500
    if option is not None:
        assert option.lstrip("-").lower() in lines[0].lower(), lines[0]


def test_every_option_is_fuzzed_or_named_harmless():
    """A new option must say which kind of value it takes (or that every value is valid)."""
    root = typer.main.get_command(app)
    missing = []
    for name, cmd in root.commands.items():
        subs = getattr(cmd, "commands", None) or {None: cmd}
        for sub in subs.values():
            fuzzed = set(COMMANDS.get(name, ([], {}))[1])
            for p in sub.params:
                for opt in p.opts:
                    if opt.startswith("-") and opt not in fuzzed | NOT_FUZZED and len(opt) > 2:
                        missing.append(f"{name} {opt}")
    assert not missing, f"options with no fuzz kind: {missing}"


def test_every_argument_is_named_as_its_help_names_it(capsys):
    """Help texts name a command's argument in capitals (`fsc build`: "Validate RECIPE"); the
    usage line and the error of a missing one said {recipe} and 'recipe' under the newer
    typers, which write the parameter's own name unless it has a metavar."""
    root = typer.main.get_command(app)
    unnamed = []
    for name, cmd in root.commands.items():
        subs = getattr(cmd, "commands", None) or {None: cmd}
        for sub_name, sub in subs.items():
            for p in sub.params:
                if p.param_type_name == "argument" and not (
                        p.metavar and p.metavar.strip("[].").isupper()):
                    unnamed.append(f"{name} {sub_name or ''} {p.name}".replace("  ", " "))
    assert not unnamed, f"arguments without a metavar in capitals: {unnamed}"
    assert main(["build"]) == 2
    assert "Missing argument 'RECIPE'" in capsys.readouterr().err


def test_every_option_names_its_value_in_words_not_python_types(capsys):
    """`--recipe <list[str]>`, `--seed <int range>`, `--out <list[Path]>`: typer writes an
    option's Python type where it has no metavar; each is named after the option, in capitals
    (`--seed SEED`), as argparse names them, whichever typer runs it. Choices keep their
    values (`--mode <diffusion|ar>`)."""
    root = typer.main.get_command(app)
    typed = []
    for name, cmd in root.commands.items():
        for sub in getattr(cmd, "commands", None) or {None: cmd}:
            assert main([name, *([sub] if sub else []), "--help"]) == 0
            options = capsys.readouterr().out.partition("\nOptions:\n")[2]
            typed += [f"fsc {name} {sub or ''}: {line.strip()}" for line in options.splitlines()
                      if any(t in line for t in ("<int", "<str>", "<float>", "<path>", "list["))]
    assert not typed, typed
    assert main(["decode", "--help"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "--seed SEED" in said  # a choice in each typer's brackets:
    assert "--mode <diffusion|ar>" in said or "--mode [diffusion|ar]" in said


def test_every_path_given_empty_is_refused(capsys, tmp_path, monkeypatch):
    """A path given empty (`--out "$DIR"` of an unset DIR) read as the current folder:
    `fsc train --out ""` trained into it, `--store ""` kept a store there. Every path option
    and argument of every command refuses it in one line, exit 2, writing nothing."""
    monkeypatch.chdir(tmp_path)
    root = typer.main.get_command(app)
    tried = []
    for name, cmd in root.commands.items():
        for sub_name, sub in (getattr(cmd, "commands", None) or {None: cmd}).items():
            words = [name, *([sub_name] if sub_name else [])]
            for p in sub.params:
                if not _takes_path(p):
                    continue
                args = [*words, "", "x"] if p.param_type_name == "argument" else [
                    *words, p.opts[0], ""]
                assert main(args) == 2, args
                err = capsys.readouterr().err
                assert err.count("\n") == 1 and "empty; give a path" in err, (args, err)
                tried.append(" ".join(args))
    assert "train --out " in tried and "push  x" in tried and len(tried) > 20
    assert "eval --tokenizer " in tried  # a DIR read as text (fsc eval read "" as .)
    assert list(tmp_path.iterdir()) == []


def test_bare_fsc_prints_help_and_exits_0(capsys):
    assert main([]) == 0
    assert "Usage" in capsys.readouterr().out


def test_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setenv("FSC_DEBUG", "1")
    with pytest.raises(Exception):  # noqa: B017 - whichever error the library raises
        main(["build", "nope_recipe"])


def test_the_oldest_typer_run_is_the_one_pyproject_allows():
    """`make test-typer-oldest` runs this file under the lowest typer of the pinned range."""
    import os
    import re
    from pathlib import Path

    root = Path(__file__).parents[2]
    low = re.search(r'"typer>=([\d.]+),', (root / "pyproject.toml").read_text()).group(1)
    assert re.search(rf"^TYPER_OLDEST := {re.escape(low)}(\.0)?$",
                     (root / "Makefile").read_text(), re.M), low
    expected = os.environ.get("FSC_EXPECT_TYPER")
    if expected is None:
        pytest.skip("not the oldest-typer run")
    assert typer.__version__ == expected
