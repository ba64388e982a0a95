# Paddle LLM Studio. `make run` and `make test` work on a brand-new machine (Python 3.11).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
HOST   ?= 127.0.0.1
PORT   ?= 7860
export PADDLE_STUDIO_HOME ?= $(CURDIR)/workspace
# demo parts already built (by the tests, or by another workspace) are copied from here, not rebuilt
export PADDLE_STUDIO_DEMO_CACHE ?= $(CURDIR)/.cache/demo-ws

.PHONY: setup demo run test test-journey test-fast bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/paddle-studio demo init

# the page opens at once; a missing demo workspace is built meanwhile as a job the page follows
run: setup
	$(BIN)/paddle-studio ui --host $(HOST) --port $(PORT) --demo

test: setup
	$(BIN)/python -m pytest

test-journey: setup
	$(BIN)/python -m pytest -m journey

test-fast: setup
	$(BIN)/python -m pytest -m "not browser and not slow"

bench: setup
	$(BIN)/python bench/validate_throughput.py
	$(BIN)/python bench/studio_startup.py
	$(BIN)/python bench/train_overhead.py
	$(BIN)/python bench/ui_latency.py
	$(BIN)/python bench/serve_latency.py
	$(BIN)/python bench/quant_presets.py --model .cache/demo-ws/models/demo-base --data .cache/demo-ws/datasets/demo --out .cache/bench-quant

clean:
	rm -rf $(VENV) build *.egg-info
