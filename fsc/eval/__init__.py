"""`fsc eval`'s tasks, registered by name in TASKS (fsc.eval.tasks): each is one module with a
`check(grid, tokenizer)` (before any model is loaded) and a `measure(model, tokenizer, grid,
lengths, device)` that yields each cell's measures; `fits` checks the memory a task needs
before any model is loaded; `score` is the one dispatch the driver and every worker call.

- niah, mqar (fsc.eval.retrieval): retrieval by length × depth, recall by pairs × length
- niah's variants, vt, cwe, fwe (fsc.eval.ruler): the RULER-style suite, scored as RULER does;
  ruler: all of them in one run
- loss (fsc.eval.loss): held-out NLL, or its bound, per token and per byte
- genppl (fsc.eval.genppl): generative perplexity of samples under a separate scorer

A new task is one module and a line in TASKS; the columns its cells hold besides EvalCell's
shared ones are declared in fsc.eval.columns (light: `fsc schema` reads them without torch)
and named in that line, and a store gains them when the task first writes. Scorers (fsc
checkpoints or transformers models) are adapters in fsc.eval.scorers; the model and the store
never import them. This package's own module imports nothing: `fsc schema` imports
fsc.eval.columns alone.
"""
