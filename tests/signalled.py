"""A Python script run in a new process (as the console script runs, its store in the test's
folder) that says "ready" on stderr once it waits where the test means to stop it, then that
signal sent to it: its exit status, stdout and stderr."""

import os
import subprocess
import sys
from pathlib import Path


def signalled(script: str, *args: str, cwd: Path, signum: int, timeout: float = 30):
    proc = subprocess.Popen([sys.executable, "-c", script, *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "FSC_STORE": str(cwd / "s")})
    try:
        assert proc.stderr.readline().strip() == "ready"
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
    return proc.returncode, out, err
