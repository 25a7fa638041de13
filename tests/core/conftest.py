import subprocess
import sys

import pytest


@pytest.fixture
def fsc_cli(tmp_path):
    """Run `python -m fsc ...` in a subprocess (the real error boundary); returns the result."""

    def run(*args, check=None):
        res = subprocess.run([sys.executable, "-m", "fsc", *map(str, args)], capture_output=True,
                             text=True, cwd=tmp_path, timeout=300)
        if check is not None:
            assert res.returncode == check, res.stderr
        return res

    return run
