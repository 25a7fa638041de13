#!/usr/bin/env bash
# Every GPU check in one call of at most ~9.5 minutes (`make gpu-all`), for a machine lent for
# a short time: the GPU-marked tests, the kernel check (tools.gpucheck, --budget seconds) and the
# training step of the 3B recipes (tools.train_gpu), each bounded by its own timeout, so that one
# that hangs or fails leaves the others their time. Run on the GPU machine with its own python3,
# torch and triton, from the repository root, after `make gpu-wheels` here (the wheels in .whl/).
# Logs and JSON go to $OUT (or ./gpu-out): env.txt, tests.log, gpucheck.log, gpucheck.json,
# train.log (one JSON line per recipe and backend).
#
#     tools/gpu_all.sh [CHECK_BUDGET_S=300] [TEST_TIMEOUT_S=120] [TRAIN_TIMEOUT_S=120]
set -u
budget=${1:-300}
tests_s=${2:-120}
train_s=${3:-120}
. tools/gpu_common.sh  # $out, the install, PYTHONPATH, stamp, env.txt

stamp "tests (timeout ${tests_s} s)"
timeout -k 10 "$tests_s" python3 -m pytest -q -m gpu -o addopts="" -p no:cacheprovider tests/gpu \
  >"$out/tests.log" 2>&1
tests=$?
tail -n 15 "$out/tests.log"

stamp "gpucheck (budget ${budget} s)"
timeout -k 10 "$((${budget%.*} + 40))" python3 -m tools.gpucheck --budget "$budget" \
  >"$out/gpucheck.log" 2>&1
check=$?
tail -n 60 "$out/gpucheck.log"

stamp "train (timeout ${train_s} s)"
timeout -k 10 "$train_s" python3 -m tools.train_gpu >"$out/train.log" 2>&1
train=$?
cat "$out/train.log"
stamp "done: tests $tests, gpucheck $check, train $train"
exit $((tests || check || train))
