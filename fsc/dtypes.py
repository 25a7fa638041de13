"""The dtypes a recipe may name, and their sizes (pure Python: the cost model reads them)."""

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
