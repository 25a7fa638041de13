"""fsc models in EleutherAI's lm-evaluation-harness (the `fsc[harness]` extra).

- fsc.harness.likelihood: the numbers the harness asks for, on fsc alone: exact log-
  probabilities at G = 1, the masked-diffusion bound by Monte Carlo at G > 1, read against a
  cache of the folded context.
- fsc.harness.lm: the harness model `fsc` (a TemplateLM), imported only where lm-eval is.
- fsc.harness.run: `fsc eval CKPT --task harness`, each metric a row of the store.
- `python -m fsc.harness ARGS`: the harness's own command line with `--model fsc`.
"""

import importlib.util


def available() -> bool:
    """Whether lm-evaluation-harness is installed (`fsc[harness]`); nothing is imported."""
    return importlib.util.find_spec("lm_eval") is not None
