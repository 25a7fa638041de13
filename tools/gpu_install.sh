#!/usr/bin/env bash
# On the GPU machine, with its own python3, torch and triton (no venv, no network): the wheels it
# lacks from .whl/ (made here by `make gpu-wheels`), then fsc editable (setup.py maps kernels/ to
# the package fsc.kernels), no dependencies, into $GPU_SITE (default /tmp/fsc-site): run the
# checks with PYTHONPATH=$GPU_SITE. Used by `make gpu-check` and tools/gpu_all.sh.
#
#     tools/gpu_install.sh [LOG]      # LOG: where pip's output goes (default: the terminal)
set -u
site=${GPU_SITE:-/tmp/fsc-site}
log=${1:-/dev/stderr}
status=0
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$site" .whl/*.whl \
    >>"$log" 2>&1 || { echo "wheel install failed: see $log"; status=1; }
fi
PYTHONPATH="$site" python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
  >>"$log" 2>&1 || { echo "fsc install failed: see $log"; status=1; }
exit $status
