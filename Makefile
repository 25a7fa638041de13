# fsc — every target installs what it needs into .venv first.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: install test lint run gpu-check bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: the CPU build lies on local disk; a bare range could pull a CUDA build.
	$(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check fsc kernels tests

run: install
	$(BIN)/fsc profile

gpu-check: install
	$(BIN)/python -m fsc.gpucheck

bench: install
	$(BIN)/python -m fsc.bench

clean:
	rm -rf $(VENV) build *.egg-info
