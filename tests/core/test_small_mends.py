"""Small mends across the CLI: a stop signal no command caught is said; the decode memory check
counts what the decoder holds per batch; `fsc plot` keeps each --where apart; `fsc report`
leaves empty lists out; run times in JSON as `fsc query --json` writes them; `fsc eval --task
harness --retries` gets the harness's own refusal. A Ctrl-C while the command line loads is one
line; a rolling save the working directory is in is not pruned; the harness's defaults are `fsc
eval`'s; a layer pattern of numbers or counts says what a pattern is; an --address where
something other than Ray answers is one line, not minutes of Ray's retries."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from signalled import signalled

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
    code, out, err = signalled(SLOW_RECIPES, "recipes", cwd=tmp_path, signum=signal.SIGINT)
    assert code == 130 and out == ""
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


# A Ctrl-C that lands while fsc.cli.main is still importing its command groups: the import hook
# sends SIGINT to the process as fsc.cli.decode is looked for (SIGINT restored, see above).
EARLY_CTRL_C = textwrap.dedent("""
    import importlib, os, runpy, signal, sys, tomllib
    signal.signal(signal.SIGINT, signal.default_int_handler)
    class Stop:
        def find_spec(self, name, path=None, target=None):
            if name == "fsc.cli.decode":
                os.kill(os.getpid(), signal.SIGINT)
    sys.meta_path.insert(0, Stop())
    entry, sys.argv = sys.argv[1], ["fsc", "recipes"]
    if entry == "module":
        runpy.run_module("fsc", run_name="__main__", alter_sys=True)
    with open("{pyproject}", "rb") as f:  # as the console script's wrapper does
        module, _, name = tomllib.load(f)["project"]["scripts"]["fsc"].partition(":")
    sys.exit(getattr(importlib.import_module(module), name)())
""")


@pytest.mark.parametrize("entry", ["module", "script"])
def test_ctrl_c_while_the_command_line_loads_is_one_line(tmp_path, entry):
    """`python -m fsc` and the `fsc` script imported fsc.cli.main unguarded: a Ctrl-C in its
    first fraction of a second printed Python's traceback."""
    pyproject = os.path.join(os.path.dirname(__file__), "..", "..", "pyproject.toml")
    code = EARLY_CTRL_C.replace("{pyproject}", os.path.abspath(pyproject))
    res = subprocess.run([sys.executable, "-c", code, entry], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env={**os.environ, "FSC_STORE": str(tmp_path / "s")})
    assert "Traceback" not in res.stderr and "KeyboardInterrupt" not in res.stderr
    assert res.returncode == 130 and res.stderr.strip() == "interrupted" and res.stdout == ""


def test_ctrl_c_after_the_command_ended_is_one_line(monkeypatch, capsys):
    """An interrupt past main's own boundary (while it reported the end) left run() as a
    traceback."""
    from fsc.cli import main as cli

    def late(argv=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "main", late)
    try:
        cli.run()
    except SystemExit as ended:
        code = ended.code
    except KeyboardInterrupt:  # (not let through: pytest would stop the whole session)
        pytest.fail("the interrupt left run()")
    assert code == 130 and capsys.readouterr().err.strip() == "interrupted"


@pytest.mark.slow  # two trainings: about 4 s
def test_a_rolling_save_the_user_stands_in_is_kept(fsc_main, tmp_path, monkeypatch):
    """`fsc train --resume ..` from inside a rolling step directory: --keep 1 deleted that
    directory under the user's shell at the next save, and the save after it failed on the
    relative path ("[Errno 2] No such file or directory")."""
    fsc_main("train", "tiny_attn", "--data", "shakespeare", "--train-steps", "4", "--seq-len",
             "16", "--batch", "1", "--out", "run", "--save-minutes", "0.00001", "--keep", "1",
             "--stop-after", "1", "--store", "st", check=0)
    here = tmp_path / "run" / "step-000001"
    monkeypatch.chdir(here)
    res = fsc_main("train", "--resume", "..", "--store", tmp_path / "st")
    assert res.returncode == 0, res.stderr
    assert (here / "model.safetensors").is_file()  # kept: the working directory
    assert sorted(p.name for p in (tmp_path / "run").glob("step-*")) == [
        "step-000001", "step-000003", "step-000004"]  # step 2 pruned (--keep 1)


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_resume_dot_inside_the_newest_step_trains_into_its_run(fsc_main, tmp_path, monkeypatch):
    """`fsc train --resume .` from inside the run's newest step: Path('.').parent is '.', so
    the run went on inside the step checkpoint itself (step-000002/step-000003, its own
    `latest`), and the check for later steps beside it was made inside it too."""
    fsc_main("train", "tiny_attn", "--data", "shakespeare", "--train-steps", "3", "--seq-len",
             "16", "--batch", "1", "--out", "run", "--stop-after", "2", "--store", "st", check=0)
    here = tmp_path / "run" / "step-000002"
    monkeypatch.chdir(here)
    res = fsc_main("train", "--resume", ".", "--store", tmp_path / "st")
    assert res.returncode == 0, res.stderr
    assert not list(here.glob("step-*")) and not (here / "latest").exists()
    assert (tmp_path / "run" / "step-000003").is_dir()
    assert (tmp_path / "run" / "latest").read_text().strip() == "step-000003"


def test_pruning_passes_over_the_working_directory(tmp_path, monkeypatch):
    """The same, at once: prune keeps the rolling save the working directory is in (or below)
    and deletes the others past --keep."""
    from fsc.train.state import STATE_JSON, prune, step_dir

    for step in range(1, 5):
        (step_dir(tmp_path, step) / "sub").mkdir(parents=True)
        (step_dir(tmp_path, step) / STATE_JSON).write_text('{"milestone": false}')
    monkeypatch.chdir(step_dir(tmp_path, 1) / "sub")
    prune(tmp_path, 1, step_dir(tmp_path, 4))
    assert sorted(p.name for p in tmp_path.glob("step-*")) == ["step-000001", "step-000004"]


def test_the_harness_defaults_are_fsc_evals_own():
    """The command that runs a harness run again leaves out the values `fsc eval` takes
    anyway: they must be its options' defaults, or it would run with other settings."""
    import typer

    from fsc.cli.main import app
    from fsc.scale.evaluation import HARNESS_DEFAULTS

    params = {p.name: p.default for p in typer.main.get_command(app).commands["eval"].params}
    assert {name: params[name] for name in HARNESS_DEFAULTS} == HARNESS_DEFAULTS


def test_a_harness_run_again_leaves_the_default_batch_out(fsc_main, tmp_path):
    """A harness run at the defaults was named to run again with `--batch 20`, the default
    --batch that HARNESS_DEFAULTS left out."""
    from fsc.harness.run import HarnessRequest
    from fsc.store import Store

    st = Store(tmp_path / "st")
    request = HarnessRequest(source="ck", tasks=("arc_easy",), batch=20, seed=0, device="auto")
    run = st.start_run("eval", "fsc eval ck --task harness --tasks arc_easy", None,
                       {"request": {**request.__dict__, "tasks": list(request.tasks)},
                        "task": "harness"})
    st.finish_run(run, "failed", error="interrupted")
    res = fsc_main("eval", "--resume", run, "--store", tmp_path / "st", check=2)
    assert _said(res).endswith("run it again, `fsc eval ck --task harness --tasks arc_easy`")


PATTERN_RECIPE = ("name: t\nd_model: 64\nn_layers: 4\nvocab_size: 256\nlayers:\n  pattern: {}\n"
                  "attention: {{n_heads: 4, n_kv_heads: 4, head_dim: 16}}\nmamba: {{d_state: 8}}\n")


@pytest.mark.parametrize("pattern, said", [
    ("1e3", "layers.pattern: a number, not mixer letters (YAML reads 1e3 or 12 as one) (got "
            "1000.0); allowed: letters A (attention), M (mamba),"),
    ("12", "layers.pattern: a number, not mixer letters (YAML reads 1e3 or 12 as one) (got 12)"),
    ("3M1A", "layers.pattern: unknown letter '1' (one letter per layer, no counts: write MMMA) "
             "(got '3M1A'); allowed: A (attention), M (mamba),"),
    ("AM1", "layers.pattern: unknown letter '1' (one letter per layer, no counts) (got 'AM1')"),
])
def test_a_pattern_of_numbers_says_what_a_pattern_is(fsc_main, tmp_path, pattern, said):
    """`pattern: 1e3` said `expected text (got 1000.0)`; `3M1A` said only that '1' is not a
    letter."""
    (tmp_path / "p.yaml").write_text(PATTERN_RECIPE.format(pattern))
    res = fsc_main("build", "p.yaml")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert _said(res).startswith(f"error: p.yaml: {said}")


@pytest.fixture
def answering():
    """answering(reply) -> the port of a server on loopback that answers each connection with
    `reply` (None: reads and says nothing) and closes it."""
    import socket
    import threading

    servers = []

    def start(reply):
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve():
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.recv(64)
                    if reply is None:
                        conn.recv(64)  # until the client gives up
                    else:
                        conn.sendall(reply)

        threading.Thread(target=serve, daemon=True).start()
        return server.getsockname()[1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("reply", [b"HTTP/1.0 400 Bad request\r\n\r\n", None])
def test_an_address_that_is_not_ray_is_one_line(fsc_main, answering, monkeypatch, reply):
    """A web server at --address: ray.init retried for many minutes, printing its own log
    lines (Failed to connect to GCS ...), and Ctrl-C did not stop it."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance is up in this process")
    monkeypatch.setattr("fsc.scale.executors.CONNECT_S", 0.5)
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("ray.init was called"))
    port = answering(reply)
    res = fsc_main("profile", "-r", "tiny_attn", "--S", "16", "--B", "1", "--executor", "ray",
                   "--address", f"127.0.0.1:{port}", "--store", "st")
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert _said(res).startswith(f"error: --address 127.0.0.1:{port}: something answers there, "
                                 "but not a Ray cluster (no gRPC reply); ")


def test_a_grpc_server_passes_the_address_check(answering):
    from fsc.scale.executors import _check_ray_address

    _check_ray_address(f"127.0.0.1:{answering(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))}")


def test_address_auto_checks_the_ray_address_it_reads(fsc_main, answering, monkeypatch):
    """`--address auto` joins RAY_ADDRESS where it is set (ray.init reads it): a web server
    there was not checked, and ray.init retried for minutes."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance is up in this process")
    monkeypatch.setattr("fsc.scale.executors.CONNECT_S", 0.5)
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("ray.init was called"))
    port = answering(b"HTTP/1.0 400 Bad request\r\n\r\n")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    res = fsc_main("profile", "-r", "tiny_attn", "--S", "16", "--B", "1", "--executor", "ray",
                   "--address", "auto", "--store", "st")
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert _said(res).startswith(f"error: --address auto reads RAY_ADDRESS=127.0.0.1:{port}: "
                                 "something answers there, but not a Ray cluster")


@pytest.mark.parametrize("env", ["nohost", "127.0.0.1:http", "ray://:10001"])
def test_a_ray_address_without_a_port_is_one_line(fsc_main, monkeypatch, env):
    """(--address itself is checked where the options are read.)"""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance is up in this process")
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("ray.init was called"))
    monkeypatch.setenv("RAY_ADDRESS", env)
    res = fsc_main("profile", "-r", "tiny_attn", "--S", "16", "--B", "1", "--executor", "ray",
                   "--address", "auto", "--store", "st")
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert _said(res) == (f"error: --address auto reads RAY_ADDRESS={env}: not HOST:PORT (or "
                          "ray://HOST:PORT)")


def test_address_local_starts_a_cluster_here_whatever_ray_address_says(fsc_main, monkeypatch):
    """ray.init() with no address joins RAY_ADDRESS's cluster: `--address local`, which
    promises a cluster bound to this machine, joined a remote one where it was set."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray instance is up in this process")
    asked = []

    def init(*args, **kwargs):
        asked.append(kwargs)
        raise ConnectionError("stopped by the test")

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setenv("RAY_ADDRESS", "192.0.2.1:6379")  # TEST-NET: never reached
    res = fsc_main("profile", "-r", "tiny_attn", "--S", "16", "--B", "1", "--executor", "ray",
                   "--address", "local", "--store", "st")
    assert res.returncode == 1 and asked and asked[0]["address"] == "local"
    assert asked[0]["_node_ip_address"] == "127.0.0.1"


def test_an_unknown_subcommand_ends_its_sentence_once(capsys):
    """"No such command 'bogus'. (see ...)": click's full stop before fsc's pointer."""
    assert main(["runs", "bogus"]) == 2
    assert capsys.readouterr().err == "error: No such command 'bogus' (see `fsc runs --help`)\n"
