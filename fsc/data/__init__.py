"""The samples fsc trains and evaluates on, below both fsc.train and fsc.eval: the synthetic
tasks generated from a seed (`tasks`: passkey, mqar, copy) and the sources `--data` names
(`sources`: a task, a shipped corpus, a local text file, a Hugging Face dataset)."""
