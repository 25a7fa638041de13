#!/usr/bin/env bash
# The decode device check in one call of at most ~8 minutes (`make gpu-decode`), each step
# bounded by its own timeout so that one that hangs or fails leaves the others their time:
#   1. `fsc decode` end to end beside `fsc profile` (tools.bench_decode_gpu), the 3B trio at
#      S 16k and B 1 and 8, then mamba_3b at 256k from --prompt-file (docs/benchmarks.md §18);
#   2. AR decoding of Qwen3-0.6B's shape against transformers' generate, eager, static cache
#      and compiled: fp32 (the same greedy tokens) and bf16 (tools.bench_decode);
#   3. the GPU tests of decoding (replay against eager, batched against alone);
#   4. last, as it may not compile in its time, transformers' compiled static cache in bf16.
# Run on the GPU machine with its own python3, torch and triton, from the repository root,
# after `make gpu-wheels` here. Logs go to $OUT (or ./gpu-out), and the store's file at the end
# (fsc.duckdb: the rows of both benchmarks), at most 8 files in all.
#
#     tools/gpu_decode.sh [DIFFUSION_S=240] [AR_S=50] [TESTS_S=60] [COMPILE_S=60]
set -u
diffusion_s=${1:-240}
ar_s=${2:-50}
tests_s=${3:-60}
compile_s=${4:-60}
. tools/gpu_common.sh  # $out, the install, PYTHONPATH, stamp, env.txt
store=/tmp/fsc-gpu-store

stamp "fsc decode beside fsc profile (timeout ${diffusion_s} s)"
# the points in order of what they answer; each row is printed as soon as it is measured
timeout -k 10 "$diffusion_s" bash -c "
  python3 -m tools.bench_decode_gpu --recipes mamba_3b,hybrid_3b,attn_3b --S 16384 --B 1,8 \
    --store '$store' && \
  python3 -m tools.bench_decode_gpu --recipes mamba_3b --S 262144 --B 1 --store '$store'" \
  >"$out/decode.log" 2>&1
decode=$?
grep -v '^{' "$out/decode.log" | tail -n 30

ar() {  # ar NAME TIMEOUT DTYPE SIDES: one bounded run of tools.bench_decode, its table printed
  timeout -k 10 "$2" python3 -m tools.bench_decode --models qwen3-0.6b --device cuda --dtype "$3" \
    --prompt 1024 --new 128 --rounds 2 --sides "$4" --store "$store" >"$out/$1.log" 2>&1
  local rc=$?
  grep '^|\|GB' "$out/$1.log" | tail -n 8
  return $rc
}
stamp "AR against transformers, bf16 (timeout ${ar_s} s)"
ar ar-bf16 "$ar_s" bfloat16 transformers,transformers-static,fsc
bf16=$?
stamp "AR against transformers, fp32: the same greedy tokens (timeout ${ar_s} s)"
ar ar-fp32 "$ar_s" float32 transformers,transformers-static,fsc
fp32=$?
stamp "GPU tests of decoding (timeout ${tests_s} s)"
timeout -k 10 "$tests_s" python3 -m pytest -q -m gpu -o addopts="" -p no:cacheprovider \
  tests/gpu -k "decod or replayed or graph" >"$out/tests.log" 2>&1
tests=$?
tail -n 15 "$out/tests.log"
stamp "AR against transformers' compiled static cache, bf16 (timeout ${compile_s} s)"
ar ar-compile "$compile_s" bfloat16 transformers-compile,fsc
compiled=$?
cp "$store/fsc.duckdb" "$out/" 2>/dev/null
stamp "done: decode $decode, ar bf16 $bf16, fp32 $fp32, tests $tests, compiled $compiled"
exit $((decode || bf16 || fp32 || tests))
