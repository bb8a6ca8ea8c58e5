# Fresh-clone entry points. `make test` builds .venv when missing or when
# pyproject.toml changed, then runs ruff and pytest.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint start install bench clean bytecode

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench,spark]'
	# The official RocketMQ 5 (gRPC) Python client, for tests/test_grpc_proxy.py, beside the venv: its package
	# name is the C++ core client's too (a dev extra), and the tests run it in processes of their own.
	$(BIN)/python -m pip install --quiet --upgrade --target $(VENV)/rocketmq5-client rocketmq-python-client==5.1.2
	touch $(STAMP)

install: $(STAMP)

# The editable install leaves src/ uncompiled, and where PYTHONDONTWRITEBYTECODE is set every process would
# compile rocketq at import (about 0.4 s a start: servers, the command line, test subprocesses). Only changed
# files are compiled again.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q src

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

test: $(STAMP) bytecode
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest -q

start: $(STAMP) bytecode
	$(BIN)/rocketq start $(ARGS)

bench: $(STAMP)
	$(BIN)/python bench/store_bench.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .ruff_cache
