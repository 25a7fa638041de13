"""Development tools, not part of the installed package: the GPU check (`python -m
tools.gpucheck`, `make gpu-check`), the CPU benchmarks (`python -m tools.bench`, `make bench`),
the store benchmark and the sm_90 compile report (`python tools/compile_sm90.py`). Run them
from the repository root."""
