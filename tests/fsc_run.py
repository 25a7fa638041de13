"""The two ways the tests run fsc, with one result type (subprocess.CompletedProcess)."""

import io
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout


def in_process(*args, check=None) -> subprocess.CompletedProcess:
    """fsc ARGS in this process through its error boundary (fsc.cli.main.main): no interpreter
    start-up, no torch import per call."""
    from fsc.cli.main import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    if check is not None:
        assert code == check, err.getvalue()
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def new_process(*args, env=None, cwd=None, check=None, timeout=300) -> subprocess.CompletedProcess:
    """`python -m fsc ARGS` in a new process: the real exit status and a fresh interpreter."""
    res = subprocess.run([sys.executable, "-m", "fsc", *map(str, args)], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=timeout, check=False)
    if check is not None:
        assert res.returncode == check, res.stderr
    return res
