"""fsc.interrupts: SIGINT, SIGTERM, SIGUSR1 and SIGUSR2 take one path (in this process)."""

import os
import signal
import subprocess
import sys

import pytest
from signalled import signalled

from fsc.cli.main import main
from fsc.interrupts import STOP_SIGNALS, Interrupted, StopSignals, exit_code


def _send(signum):
    os.kill(os.getpid(), signum)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143),
                                          (signal.SIGUSR1, 138), (signal.SIGUSR2, 140)])
def test_every_stop_signal_raises_the_same_interruption(signum, code):
    with pytest.raises(Interrupted) as caught, StopSignals():
        _send(signum)
    assert caught.value.signum == signum and caught.value.exit_code == code == exit_code(signum)
    assert isinstance(caught.value, KeyboardInterrupt)  # what handles Ctrl-C handles it


def test_the_previous_handlers_come_back():
    def mine(signum, frame):
        pass

    before = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    signal.signal(signal.SIGUSR1, mine)
    try:
        with StopSignals():
            assert all(signal.getsignal(s) != mine for s in STOP_SIGNALS)
        assert signal.getsignal(signal.SIGUSR1) is mine
        assert signal.getsignal(signal.SIGTERM) == before[signal.SIGTERM]
    finally:
        signal.signal(signal.SIGUSR1, before[signal.SIGUSR1])


def test_held_sections_finish_before_the_signal_raises():
    written = []
    with pytest.raises(Interrupted), StopSignals() as stops, stops.held():
        _send(signal.SIGTERM)
        written.append("row")  # the section goes on to its end
    assert written == ["row"]


def test_deferred_stops_are_recorded_and_only_a_second_ctrl_c_raises():
    forwarded = []
    with StopSignals(defer=True, forward=forwarded.append) as stops:
        _send(signal.SIGTERM)
        _send(signal.SIGTERM)  # schedulers repeat it: absorbed
        _send(signal.SIGUSR2)
        assert stops.signum == signal.SIGTERM
        with pytest.raises(Interrupted) as caught:
            _send(signal.SIGINT)
    assert caught.value.signum == signal.SIGTERM  # the first signal is the reason
    assert forwarded == [signal.SIGTERM, signal.SIGTERM, signal.SIGUSR2, signal.SIGINT]


def test_the_cli_boundary_exits_with_128_plus_the_signal(monkeypatch, capsys):
    def stopped(*args, **kwargs):
        raise Interrupted(signal.SIGTERM)

    monkeypatch.setattr("fsc.cli.main.app", stopped)
    assert main(["runs"]) == 143
    assert capsys.readouterr().err.strip() == "interrupted"


# `fsc recipes` run as the console script does, with a Ctrl-C to itself while the interpreter
# exits (as torch's exit handlers run): after the command's output and status
SIGNALLED_EXIT = """
import atexit, os, signal, time
atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.2)))
from fsc.__main__ import run
import sys
sys.argv[1:] = ["recipes"]
run()
"""


def test_a_stop_signal_once_the_command_has_ended_leaves_its_status():
    res = subprocess.run([sys.executable, "-c", SIGNALLED_EXIT], capture_output=True, text=True,
                         timeout=60)
    assert (res.returncode, res.stderr) == (0, "")
    assert "tiny_attn" in res.stdout


# `fsc build` run as the console script does, held where it works (its recipe read) until it is
# sent a signal; the script leaves SIGINT at Python's handler, as a terminal does
SIGNALLED_BUILD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
ignored = sys.argv[1] == "ignored"
if ignored:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
import fsc.source
def slow(*args, **kwargs):
    print("ready", file=sys.stderr, flush=True)
    time.sleep(1 if ignored else 60)
    sys.exit(7)
fsc.source.load_source_recipe = slow
from fsc.__main__ import run
sys.argv[1:] = ["build", "tiny_attn"]
run()
"""


@pytest.mark.parametrize("signum", [
    signal.SIGTERM, *(pytest.param(s, marks=pytest.mark.slow) for s in (signal.SIGUSR1,
                                                                        signal.SIGINT))])
def test_a_command_without_handlers_of_its_own_says_every_stop_signal(tmp_path, signum):
    """SIGTERM (a scheduler's, `timeout`'s) ended `fsc build` or a one-prompt `fsc decode`
    without a word, where Ctrl-C said the one line: both now end alike, with 128 + the signal."""
    code, out, err = signalled(SIGNALLED_BUILD, "default", cwd=tmp_path, signum=signum)
    assert (code, out) == (128 + signum, "")
    assert err.strip() == "interrupted: fsc build stopped before it finished; nothing was stored"


@pytest.mark.slow  # seconds: make test-slow (CI runs it)
def test_a_signal_the_command_was_started_with_ignored_stays_ignored(tmp_path):
    """(`nohup`, a background job): the command's own handler does not take it up again."""
    code, out, err = signalled(SIGNALLED_BUILD, "ignored", cwd=tmp_path, signum=signal.SIGTERM)
    assert (code, out, err.strip()) == (7, "", "")


# run as the console script does, with a command whose work imports a module that swallows
# whatever is raised inside it (as C code clearing Python's errors does while torch and numpy
# initialise); "ready" once that import is under way
SIGNALLED_IMPORT = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, sys.argv[1])
import fsc.source
def slow(*args, **kwargs):
    import swallows
    time.sleep(30)
    sys.exit(7)
fsc.source.load_source_recipe = slow
from fsc.__main__ import run
sys.argv[1:] = ["build", "tiny_attn"]
run()
"""
SWALLOWS = """
import sys, time
print("ready", file=sys.stderr, flush=True)
try:
    time.sleep(1)
except BaseException:
    pass
"""


@pytest.mark.parametrize("signum", [
    signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_a_signal_during_an_import_is_delivered_once_it_is_done(tmp_path, signum):
    """A Ctrl-C in a command's first second (torch imported) was lost: `fsc train` trained all
    its steps and exited 0, or left numpy half imported. It now comes once the import ends."""
    (tmp_path / "swallows.py").write_text(SWALLOWS)
    code, out, err = signalled(SIGNALLED_IMPORT, str(tmp_path), cwd=tmp_path, signum=signum)
    assert (code, out) == (128 + signum, "")
    assert err.strip() == "interrupted: fsc build stopped before it finished; nothing was stored"


QUERY_STOPPED = """
import _thread, signal, sys, threading
signal.signal(signal.SIGINT, signal.default_int_handler)
from fsc.store import sandbox
execute, signum = sandbox.execute, int(sys.argv[1])
def signalled(*args, **kwargs):  # the signal while DuckDB runs the query
    threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signum)).start()
    return execute(*args, **kwargs)
sandbox.execute = signalled
from fsc.__main__ import run
sys.argv[1:] = ["query", "select * from range(20000000)", "--format", "csv"]
run()
"""


@pytest.mark.parametrize("signum", [
    signal.SIGINT, pytest.param(signal.SIGTERM, marks=pytest.mark.slow)])
def test_a_query_stopped_by_a_signal_is_an_interruption_not_a_bug(tmp_path, signum):
    """DuckDB turns a signal raised while it reads a query's rows into its own error: `fsc
    query` and `fsc export` reported Ctrl-C as an internal error, exit 1."""
    from fsc.store import Store

    Store(tmp_path / "s").check(write=True)
    Store(tmp_path / "s").start_run("profile", "fsc profile", None, {})  # a store to read
    res = subprocess.run([sys.executable, "-c", QUERY_STOPPED, str(int(signum))], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "FSC_STORE": str(tmp_path / "s")})
    assert (res.returncode, res.stdout) == (128 + signum, "")
    assert res.stderr.strip() == "interrupted: fsc query stopped before it finished; nothing was stored"


LONG_QUERY_STOPPED = """
import signal, sys, threading
signal.signal(signal.SIGINT, signal.default_int_handler)
from fsc.store import export, sandbox
module = export if sys.argv[1] == "export" else sandbox
name = "write" if module is export else "execute"
run_it = getattr(module, name)
def signalled(*args, **kwargs):  # Ctrl-C once DuckDB runs the query
    threading.Timer(0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
    return run_it(*args, **kwargs)
setattr(module, name, signalled)
from fsc.__main__ import run
sys.argv[1:] = sys.argv[2:]
run()
"""
# one row, from an aggregate over 10^11 rows: DuckDB hands no row over before it is done
LONG = "select sum(a.range * b.range) from range(300000) a, range(300000) b"


@pytest.mark.parametrize("argv", [
    ["query", LONG],
    pytest.param(["query", "--write", f"create table t as {LONG}"], marks=pytest.mark.slow),
    pytest.param(["export", LONG, "--out", "x.csv"], marks=pytest.mark.slow),
])
def test_ctrl_c_stops_a_long_query_at_once(tmp_path, argv):
    """DuckDB sees a signal only while it hands rows over: Ctrl-C during a long aggregate
    waited for its end (51 s for one of 10^10 rows on a 2-core machine). It now stops the
    query at once; a --write rolls back, an export leaves no file."""
    from fsc.store import Store

    Store(tmp_path / "s").migrate()  # a store to read
    res = subprocess.run([sys.executable, "-c", LONG_QUERY_STOPPED, argv[0], *argv],
                         cwd=tmp_path, capture_output=True, text=True, timeout=30,
                         env={**os.environ, "FSC_STORE": str(tmp_path / "s")})
    assert (res.returncode, res.stdout) == (130, ""), res.stderr
    assert res.stderr.strip().startswith(f"interrupted: fsc {argv[0]} stopped before it finished")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
    assert Store(tmp_path / "s").query(
        "select count(*) from information_schema.tables where table_name = 't'")[1] == [(0,)]


class _SignalledInDel:
    """An object whose finalizer is where a signal arrives: Python prints the exception its
    handler raises there ("Exception ignored in ...") and drops it."""

    def __del__(self):
        _send(signal.SIGINT)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_whose_raise_was_dropped_stops_the_next_section():
    """A Ctrl-C while a command set up could be lost: its handler raised inside code that
    drops exceptions (a finalizer), and the sweep then ran to its end and exited 0. The
    signal stays recorded, and the next section it would have stopped (a run's recording)
    raises as it opens."""
    ran = []
    with pytest.raises(Interrupted) as caught, StopSignals():
        _SignalledInDel()  # dropped at once: the handler's raise is swallowed
        ran.append("set-up went on")
        with StopSignals():
            ran.append("the run")
    assert caught.value.signum == signal.SIGINT and ran == ["set-up went on"]
    with StopSignals() as outer, StopSignals(defer=True) as loop:
        assert loop.signum is None and outer.signum is None  # nothing heard: nothing raised
