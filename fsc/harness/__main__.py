"""`python -m fsc.harness ARGS`: lm-evaluation-harness's own command line (`lm_eval ARGS`) with
the model `fsc` registered, e.g.

    python -m fsc.harness --model fsc --model_args pretrained=runs/x,mc_samples=64 \\
        --batch_size 16 --device cpu --tasks arc_easy --include_path my_tasks --limit 100
"""

import sys

try:
    from lm_eval.__main__ import cli_evaluate

    import fsc.harness.lm  # noqa: F401 - registers the model `fsc`
except ImportError as e:
    print(f"error: the harness needs lm-evaluation-harness ({e}): pip install 'fsc[harness]'",
          file=sys.stderr)
    raise SystemExit(2) from None

if __name__ == "__main__":
    cli_evaluate()
