# fsc — every target installs what it needs into .venv first.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: install test test-slow test-all test-typer-oldest lint run browser gpu-check gpu-train gpu-decode gpu-all gpu-wheels bench retrieval reach quality stress-store clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	# torch first, pinned: the CPU build lies on local disk; a bare range could pull a CUDA build.
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

# make test runs in TEST_WORKERS processes (pytest-xdist): three on a 2-core machine, since many
# tests wait on a subprocess, a server or a file lock (measured: 170 s with 2, 160 s with 3);
# idle workers steal queued tests (--dist worksteal: 171 s against 187 s at 3d5d38a).
TEST_WORKERS ?= 3
test: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal

# The slow checks `make test` skips (the GPU check's dry run, the sm_90 compile, concurrent
# sweeps and writers, kill/Ctrl-C and resume, kernel settings in new processes); `make
# test-all` runs everything but the GPU tests. CI runs both.
test-slow: install
	$(BIN)/python -m pytest -q -m "slow and not gpu"

test-all: install
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not gpu"

# The CLI boundary again under the oldest typer pyproject.toml allows: it runs on the click
# package (newer typers carry their own copy), with the newest click pip would pair it with.
TYPER_OLDEST := 0.18.0
TYPER_OLD_DIR := $(VENV)/typer-$(TYPER_OLDEST)
test-typer-oldest: install
	$(BIN)/pip install -q --no-deps --upgrade --target $(TYPER_OLD_DIR) "typer==$(TYPER_OLDEST)" click
	PYTHONPATH=$(TYPER_OLD_DIR) FSC_EXPECT_TYPER=$(TYPER_OLDEST) $(BIN)/python -m pytest -q \
	  tests/core/test_cli_fuzz.py tests/core/test_cli.py tests/store/test_runs_cli.py \
	  tests/eval/test_lists_repeat.py tests/train/test_training_doc_claims.py

# Headless Chromium for the report's browser test (Debian's package; root, as on CI).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  timeout 120 apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive timeout 300 apt-get install -y -qq chromium >/dev/null; }
	@chromium --version 2>/dev/null | head -1

lint: install
	$(BIN)/ruff check fsc kernels tests tools

# The main job on the embedded defaults: the CPU sweep of the tiny trio into ./store, then its
# latency and memory figures and the report of it under runs/make-run/.
RUN_OUT := runs/make-run
run: install
	$(BIN)/fsc profile
	mkdir -p $(RUN_OUT)
	$(BIN)/fsc plot latency --force --out $(RUN_OUT)/latency.png
	$(BIN)/fsc plot memory --force --out $(RUN_OUT)/memory.png
	$(BIN)/fsc report --force --out $(RUN_OUT)/report.html

# On the GPU machine, with its own python3, torch and triton (no venv, no network): wheels it
# lacks come from .whl/ (made here by `make gpu-wheels`); fsc is installed editable, no deps
# (tools/gpu_install.sh).
GPU_SITE := /tmp/fsc-site
gpu-check:
	GPU_SITE=$(GPU_SITE) tools/gpu_install.sh
	export PYTHONPATH=$(GPU_SITE) TRITON_INTERPRET=0; \
	  python3 -m tools.gpucheck; check=$$?; \
	  python3 -m pytest -q -m gpu -o addopts="" tests/gpu; tests=$$?; \
	  exit $$((check || tests))

# On the GPU machine after gpu-check (same install): training tokens/s and MFU of the 3B trio,
# on the torch and the fla training backends (fla from .whl/, see gpu-wheels).
gpu-train:
	PYTHONPATH=$(GPU_SITE) python3 -m tools.train_gpu

# On the GPU machine (installs as gpu-check does), in one call of at most ~8 minutes: fsc decode
# end to end beside fsc profile for the 3B trio at S 16k, B 1 and 8, and mamba_3b at 256k; AR
# decoding of Qwen3-0.6B's shape against transformers' generate (eager, static cache, compiled);
# the GPU tests of decoding (docs/benchmarks.md section 18); logs in $$OUT or gpu-out/.
gpu-decode:
	tools/gpu_decode.sh

# On a GPU machine lent for a short time: the GPU tests, gpu-check (a shorter budget) and
# gpu-train in one call of at most ~9.5 minutes, each step bounded; logs in $$OUT or gpu-out/.
gpu-all:
	tools/gpu_all.sh

# Here, before a device run: the cp312 wheels the GPU image may lack (pydantic, duckdb, pyyaml,
# and fla-core with einops for the fla training backend).
GPU_WHEELS := pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 duckdb==2.0.1 pyyaml==6.0.3 fla-core==0.6.0 einops==0.8.2
gpu-wheels:
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
	  --platform manylinux2014_x86_64 -d .whl $(GPU_WHEELS)

# Every section of tools/bench.py into ./store (docs/benchmarks.md sections 1-3, 4b, 8, 11, 12):
# start-up, cached against uncached decoding (its 4,096-token uncached run took 47 minutes),
# step time against S, CPU threads, the training step, reading results back, the sweep by
# executor. `python -m tools.bench --only SECTION,...` runs some of them.
bench: install
	$(BIN)/python -m tools.bench

# The miniature of the paper's Tables 2 and 8 (docs/benchmarks.md section 9): train the passkey
# trio (attention, Mamba-2, the MMMA hybrid) on passkey at 128 tokens, the needle's repeat of
# the key supervised too, until each retrieves (--stop-at 0.95, at most 8,000 steps each; about
# 22 minutes in all on 2 cores), evaluate at 1x..16x and five depths, print the
# tables and draw the figures into docs/img/retrieval; runs/retrieval holds the checkpoints and
# the store.
retrieval: install
	$(BIN)/python -m tools.retrieval --figures docs/img/retrieval

# Long reach on the RULER-style suite (docs/benchmarks.md section 19): train attention, Mamba-2
# and the MMMA hybrid (NoPE attention trained with logn 16, its Mamba-2 layers' memory bounded to
# a half-life of 8 tokens: passkey_hybrid_halflife8) on a mix
# of the suite at 128 tokens (passkey twice as often as each of niah multikey and
# multivalue, vt, cwe and fwe; --needles 2 --hops 2 --words 2, repeats supervised), 2,000 steps
# each, score every part of the suite at 1x..16x, print the RULER-style tables and draw
# docs/img/reach/ruler.png (56 minutes measured on 2 cores, each training scored as it ends);
# runs/reach holds the checkpoints and the store.
reach: install
	$(BIN)/python -m tools.reach --figures docs/img/reach

# The miniature of the paper's Table 5 (docs/benchmarks.md section 14): train the quality trio
# (attention, Mamba-2, the MMMA hybrid; G 8, the every-block objective), an AR model of
# attention's size and a wider AR scorer on the shipped Shakespeare, then Gen-PPL at K = 1, 2,
# 4, 8 (confidence and random reveal order) under the scorer beside the validation text, and the
# held-out NLL; prints the tables and the targets, draws docs/img/quality (under 30 minutes on
# 2 cores). runs/quality holds the checkpoints and the store.
quality: install
	$(BIN)/python -m tools.quality --figures docs/img/quality

# Concurrent writers and a read loop on one store, 50 fresh stores, each writer delayed at
# random up to 50 ms between DuckDB's header read and its file lock (needs cc); stops at the
# first failed round (docs/benchmarks.md section 7).
stress-store: install
	$(BIN)/python -m tools.stress_store --writers 8 --points 4 --rounds 50 --delay-lock 50

clean:
	rm -rf $(VENV) build *.egg-info
