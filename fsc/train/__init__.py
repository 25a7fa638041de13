"""Training and evaluation: `fsc train` (the frontier and autoregressive objectives on
synthetic tasks or local text) and `fsc eval` (needle retrieval, mqar, held-out loss)."""
