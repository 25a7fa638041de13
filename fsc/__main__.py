"""`python -m fsc`, and the `fsc` console script's entry point (pyproject.toml): a Ctrl-C
while the command line is still loading (fsc.cli.main imports every command group) ends in
the one line and the exit status of any other interruption, never a traceback."""

import sys

try:
    from fsc.cli.main import run
except KeyboardInterrupt:
    print("interrupted", file=sys.stderr)
    sys.exit(130)

if __name__ == "__main__":
    run()
