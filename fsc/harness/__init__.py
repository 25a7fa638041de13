"""fsc models in EleutherAI's lm-evaluation-harness (the `fsc[harness]` extra).

- fsc.harness.likelihood: the numbers the harness asks for, on fsc alone: exact log-
  probabilities at G = 1, the masked-diffusion bound by Monte Carlo at G > 1, read against a
  cache of the folded context.
- fsc.harness.lm: the harness model `fsc` (a TemplateLM), imported only where lm-eval is.
- fsc.harness.run: `fsc eval CKPT --task harness`, each metric a row of the store.
- `python -m fsc.harness ARGS`: the harness's own command line with `--model fsc`.
"""

import importlib.util

from fsc.store.schema import Column

DEFAULT_MAX_LENGTH = 2048  # the hf backend's where a model names none; fsc's own checkpoints'
MC_SAMPLES = 32  # the draws per block of a diffusion model's bound where none are asked

COLUMNS = (  # `fsc eval --task harness`: its own eval_cells columns, a row per task and metric
    Column("harness_task", "VARCHAR",
           "harness: the lm-evaluation-harness task (arc_easy, piqa, a local task...)."),
    Column("metric", "VARCHAR",
           "harness: the metric's name as the harness reports it (acc, acc_norm, "
           "word_perplexity...)."),
    Column("value", "DOUBLE", "harness: the metric's value."),
    Column("value_se", "DOUBLE",
           "harness: its standard error as the harness computes it (NULL where it gives none)."),
    Column("num_fewshot", "INTEGER", "harness: few-shot examples per prompt."),
    Column("harness_version", "VARCHAR",
           "harness: the lm-evaluation-harness version that ran the task."),
    Column("mc_samples", "INTEGER",
           "harness, diffusion: Monte Carlo draws per block of the likelihood bound."),
    Column("bound", "BOOLEAN",
           "harness: true when the value rests on a bound of the likelihood (a block-diffusion "
           "model), not the exact likelihood."),
    Column("provenance", "VARCHAR", "harness: where the evaluated weights came from."),
)


def available() -> bool:
    """Whether lm-evaluation-harness is installed (`fsc[harness]`); nothing is imported."""
    return importlib.util.find_spec("lm_eval") is not None
