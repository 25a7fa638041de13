"""Recipe fields that change how weights are read, never what weights there are: a checkpoint
can be evaluated with any of them changed (`fsc eval --set KEY=VALUE`).

A module of its own, importing nothing, so that `fsc eval --help` names them without loading
the recipe schema (pydantic, PyYAML): the command line's start stays light.
"""

WEIGHT_FREE = ("attention.logn", "attention.window", "attention.rope_theta", "mamba.decay_scale",
               "mamba.decay_from", "mamba.decay_power", "mamba.max_half_life", "state_dtype")
