# Sourced by the GPU machine's scripts (tools/gpu_all.sh, tools/gpu_decode.sh), from the
# repository root: $out (= $OUT, or ./gpu-out) made; the wheels from .whl/ and fsc installed into
# $GPU_SITE (tools/gpu_install.sh, its log in $out/install.log) and put on PYTHONPATH; `stamp`
# prints a line with the seconds since; $out/env.txt says the machine and the versions.
out=${OUT:-gpu-out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0 GPU_SITE=${GPU_SITE:-/tmp/fsc-site}
: >"$out/install.log"
tools/gpu_install.sh "$out/install.log"
export PYTHONPATH="$GPU_SITE"
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  python3 -c "import fsc, pydantic, duckdb; print('fsc imports; pydantic', pydantic.VERSION, 'duckdb', duckdb.__version__)"
  python3 -c "import fla; print('fla', fla.__version__)"
  python3 -c "import transformers; print('transformers', transformers.__version__)"
  git log -1 --format='commit %H' 2>/dev/null
} >"$out/env.txt" 2>&1
cat "$out/env.txt"
