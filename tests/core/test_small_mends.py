"""Small mends across the CLI: a stop signal no command caught is said; the decode memory check
counts what the decoder holds per batch; `fsc plot` keeps each --where apart; `fsc report`
leaves empty lists out; run times in JSON as `fsc query --json` writes them; `fsc eval --task
harness --retries` gets the harness's own refusal."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from fsc.cli.main import main
from fsc.interrupts import Interrupted


def _said(res) -> str:
    return " ".join(res.stderr.split())


# (Ctrl-C raises KeyboardInterrupt as at a terminal: a shell starts a background job, such as a
# test run, with SIGINT ignored, which its children inherit)
SLOW_RECIPES = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import fsc.recipe
    def slow(*args, **kwargs):
        print("ready", file=sys.stderr, flush=True)
        time.sleep(60)
    fsc.recipe.shipped_recipes = slow
    from fsc.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def test_ctrl_c_outside_a_commands_handler_is_said(tmp_path):
    """typer turned the KeyboardInterrupt into exit 130 itself: the `interrupted` line the
    boundary means to print never showed."""
    proc = subprocess.Popen([sys.executable, "-c", SLOW_RECIPES, "recipes"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FSC_STORE": str(tmp_path / "s")})
    try:
        assert proc.stderr.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130 and out == ""
    assert err.strip() == "interrupted: fsc recipes stopped before it finished; nothing was stored"


def test_a_stop_signal_outside_a_commands_handler_keeps_its_exit_status(monkeypatch, capsys):
    """A SIGTERM (fsc.interrupts) that escaped a command ended as Ctrl-C does, exit 130."""

    def stopped(*args, **kwargs):
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr("fsc.recipe.shipped_recipes", stopped)
    assert main(["recipes"]) == 143
    assert "interrupted: fsc recipes stopped" in capsys.readouterr().err


def _lines(res) -> list[str]:
    return res.stdout.splitlines()


def test_a_mixed_batch_counts_one_rows_prefill_and_the_caches_it_holds(fsc_main, tmp_path,
                                                                       monkeypatch):
    """Prompts of different lengths are each folded alone, one row a pass: the check counted
    the prefill as if every row were folded together, and refused a 400- and a 300-token
    prompt where the decoder holds less than for two of 400 (by hand, tiny_attn at G 4,
    --length 8, fp32: 378,112 B of weights, KV 512 B a token a row: the two alone caches
    (400 + 300) × 512, then the merged 2 × 412 × 512 and a step's 8 × 1,280 + 8 × 288 × 8,
    above one row's prefill of 400 × 1,280 + 288 × 8 and its 5 × 400 × 400 mask: 2,050,816 B;
    the check said 3,042,304)."""
    from fsc import loading
    from fsc.recipe import load_recipe

    recipe = load_recipe("tiny_attn")
    assert loading.batch_bytes(recipe, [400, 300], 8, 4)[0] == 2_050_816
    two_of_400 = loading.decode_bytes(recipe, 400, 8, 4, B=2)[0]
    monkeypatch.setattr(loading, "free_bytes", lambda device: two_of_400)
    (tmp_path / "mixed.txt").write_text("a" * 400 + "\n" + "b" * 300 + "\n")
    res = fsc_main("decode", "tiny_attn", "--length", "8", "--batch", "2", "--prompts",
                   "mixed.txt")
    assert res.returncode == 0 and len(_lines(res)) == 2, res.stderr


def test_the_prompts_check_is_the_batch_that_holds_the_most(monkeypatch):
    """Given the prompts' lengths, each batch is counted as it is formed and folded: one of a
    single length together, one of several each row alone; the limit said is the length
    every prompt cut to it fits at."""
    from fsc import loading
    from fsc.errors import WeightsDoNotFit
    from fsc.recipe import load_recipe

    recipe = load_recipe("tiny_attn")
    lengths = [400, 10, 300, 300]  # batches of 2: [400, 10] alone, [300, 300] together
    most = max(loading.batch_bytes(recipe, [400, 10], 8, 4)[0],
               loading.batch_bytes(recipe, [300, 300], 8, 4)[0])
    assert most < loading.decode_bytes(recipe, 400, 8, 4, B=2, mixed=True)[0]
    loading.check_prompt_fits(recipe, "cpu", lengths, 8, 4, budget=most, B=2)
    with pytest.raises(WeightsDoNotFit) as refused:
        loading.check_prompt_fits(recipe, "cpu", lengths, 8, 4, budget=most - 1, B=2)
    said = str(refused.value)
    assert "the longest prompt's 400 tokens at --batch 2 and --length 8 need" in said
    fit = int(said.split("at most ")[1].split()[0])

    def held(n):
        return loading.prompts_bytes(recipe, [min(m, n) for m in lengths], 8, 4, B=2)[0]

    assert held(fit) <= most - 1 < held(fit + 1)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """A store holding one small profile run of tiny_attn at S 16, B 1 and 2."""
    store = tmp_path_factory.mktemp("profiled") / "store"
    assert main(["profile", "-r", "tiny_attn", "--S", "16", "--B", "1,2", "--repeats", "1",
                 "--warmup", "0", "--store", str(store)]) == 0
    return store


def test_each_where_is_its_own_condition(fsc_main, profiled):
    """Several --where were glued into one string: a trailing `-- comment` in one swallowed
    the ones after it, and "nothing to plot" quoted the glued string."""

    res = fsc_main("plot", "latency", "--where", "B = 1 -- one row", "--where",
                   "recipe = 'tiny_attn'", "--out", "l.png", "--store", profiled, "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["rows"] == 1, res.stderr
    res = fsc_main("plot", "latency", "--where", "B = 1", "--where", "recipe = 'nope'",
                   "--out", "m.png", "--store", profiled)
    assert res.returncode == 2 and _said(res).startswith(
        "error: nothing to plot: --where \"B = 1\" and --where \"recipe = 'nope'\" leave no row "
        "of run ")


def test_a_report_leaves_empty_settings_out(fsc_main):
    """An eval run with no warnings showed an empty `config: warnings` row."""
    fsc_main("eval", "tiny_attn", "--task", "niah", "--lengths", "128", "--depths", "0.5",
             "--samples", "1", "--store", "st", check=0)
    fsc_main("report", "--store", "st", "--out", "r.md", check=0)
    page = open("r.md").read()
    assert "| config: task | niah |" in page
    assert "config: warnings" not in page and "config: step_dirs" not in page


def test_runs_json_writes_times_as_query_json_does(fsc_main, profiled, tmp_path):
    """`fsc runs --json` wrote Python's str(datetime) (`...27.500000`), `fsc query --json`
    DuckDB's text (`...27.5`)."""
    import shutil

    store = tmp_path / "copy"
    shutil.copytree(profiled, store)
    fsc_main("query", "--write", "update runs set ended_at = TIMESTAMP '2026-12-07 08:42:27.5'",
             "--store", store, check=0)
    [queried] = json.loads(fsc_main("query", "select * from runs", "--json", "--store", store,
                                    check=0).stdout)
    [listed] = json.loads(fsc_main("runs", "--json", "--store", store, check=0).stdout)
    shown = json.loads(fsc_main("runs", "show", "latest", "--json", "--store", store,
                                check=0).stdout)
    assert listed["ended_at"] == shown["ended_at"] == queried["ended_at"] == "2026-12-07 08:42:27.5"
    assert listed["started_at"] == shown["started_at"] == queried["started_at"]


@pytest.mark.parametrize("option", [["--retries", "3"], ["--address", "auto"],
                                    ["--slurm-time", "5"]])
def test_the_harness_refuses_executor_options_in_its_own_words(fsc_main, option):
    """--retries 3 with --task harness was told to add --workers or --executor, which the
    harness then refused too."""
    res = fsc_main("eval", "tiny_attn", "--task", "harness", "--tasks", "arc_easy", *option)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert _said(res) == (f"error: {' '.join(option)}: --task harness runs in this process, on "
                          "one device (--device); drop it")
