# Everything a fresh machine needs is installed by these targets.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
NPM_DIR := tests/npm

.PHONY: demo test check lint typecheck bench reliability reliability-long install npm bytecode clean

$(BIN)/pi-mcp: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(BIN)/pi-mcp

install: $(BIN)/pi-mcp

$(NPM_DIR)/node_modules/.package-lock.json: $(NPM_DIR)/package.json $(NPM_DIR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(NPM_DIR) && npm ci --no-audit --no-fund --loglevel=error; \
	else echo "npm not found: tests that need the npm servers will skip"; fi

npm: $(NPM_DIR)/node_modules/.package-lock.json

## Byte-compile the package and the tests' own servers. pip compiles what it installs, but not
## an editable install; where PYTHONDONTWRITEBYTECODE is set (container and CI images set it),
## every process would compile again each module it imports: half a second per `pi-mcp`
## command, a third of the test suite's time. Python still reads what is compiled here, and
## ignores a file compiled before its source changed.
bytecode: install
	@$(BIN)/python -m compileall -q -j 0 src tests > /dev/null

## Install the Debian packages some tests run (redis-server, nginx, chromium) when missing and
## apt-get works; anywhere else those tests skip and say why.
.PHONY: system-packages
system-packages:
	@scripts/install-debian-packages.sh

## Run the bundled demo: real servers, a search, a describe, a call and the token saving.
demo: install npm bytecode
	$(BIN)/pi-mcp demo

## Run the whole test suite (slow tests included). Most tests wait on the servers and
## commands they start, so two workers on two cores take little more than half the time; a
## file's tests stay together on one worker, in their order, with their module fixtures made
## once.
TEST_WORKERS ?= 2
test: install npm bytecode
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

## The reliability suite alone (chaos, cache under fire, bad input, secrets, shutdown; ~3 min).
reliability: install npm bytecode
	$(BIN)/pytest -q tests/reliability

## The chaos scenario for ten minutes instead of one.
reliability-long: install npm
	$(BIN)/python bench/bench_reliability.py --minutes 10

lint: install
	$(BIN)/ruff check src tests bench bench/run examples
	$(BIN)/ruff format --check src tests bench bench/run examples

typecheck: install
	$(BIN)/mypy

check: lint typecheck test

## Run every benchmark and print one table of ratios against baselines measured in the same run.
bench: install npm bytecode
	PY=$(PY) bash bench/install_fastmcp.sh
	$(BIN)/python bench/run

clean:
	rm -rf $(VENV) $(NPM_DIR)/node_modules
