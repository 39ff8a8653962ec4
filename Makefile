# One obvious way to do each chore. `make help` lists them.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PYTHON  ?= python3

.DEFAULT_GOAL := help
# docs: the site from docs/ (mkdocs.yml); docs-check: the same, --strict, into a throwaway folder.
.PHONY: help setup run schema test check docs docs-check model deploy-check image release pytest reliability-async lint typecheck layers buf-lint buf-breaking proto proto-check bench bench-peers clean

help: ## list the chores
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

setup: $(VENV)/.installed node_modules/.installed clients/node/node_modules/.installed chromium go podman ## install everything into .venv and node_modules (and Chromium, Go and podman, as root)

.PHONY: chromium
chromium: ## Debian's Chromium for the console's browser tests (installs it when missing and root)
	@scripts/install-chromium.sh

.PHONY: podman
podman: ## podman, runc and mmdebstrap for the image and the compose stack's test (installs them when missing and root)
	@scripts/ensure-podman.sh

.PHONY: go
go: ## Debian's Go toolchain and Go gRPC packages for the Go example's test (installs them when missing and root)
	@scripts/ensure-go.sh

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml clients/edge/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e clients/python -e clients/edge -e '.[dev]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

clients/node/node_modules/.installed: clients/node/package.json clients/node/package-lock.json
	npm ci --prefix clients/node --no-audit --no-fund --loglevel=error
	touch $@

# Python only: Node (buf, the Node client's tests) and Chromium are for the tests.
run: $(VENV)/.installed ## run inboxd on an embedded PostgreSQL (data in .inboxd/); needs only .venv, not Node
	$(VENV)/bin/inboxd serve

# A broken link or anchor fails the strict build (mkdocs.yml's `validation:`, and scripts/docs_links.py for links
# that leave docs/). The site needs nothing from the network: the theme's fonts and social cards are off.
docs: $(VENV)/.installed ## build the docs site into site/ (open site/index.html)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-check: $(VENV)/.installed ## build the docs site with --strict into a throwaway folder: fails on a broken link or anchor
	@tmp=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $$tmp; rc=$$?; rm -rf $$tmp; exit $$rc

# The page is generated; tests/unit/test_config_reference.py fails when it is stale.
.PHONY: config-doc
config-doc: $(VENV)/.installed ## regenerate docs/configuration.md from the table of settings (server/inboxd/config/settings.py)
	$(PY) -m inboxd.serving.config_reference > docs/configuration.md

# The schema file is a reader's copy; the migrations are the source of truth (tests/integration/test_schema_parity.py).
schema: $(VENV)/.installed ## regenerate server/inboxd/store/schema.sql from the migrations, on a throwaway PostgreSQL
	$(PY) -m tests.integration.test_schema_parity

test: setup ## the whole test command: stub drift, lint, types, layers, buf lint, the SPIN models, deploy/, then pytest
	$(MAKE) --no-print-directory check
	$(MAKE) --no-print-directory model
	$(MAKE) --no-print-directory deploy-check
	$(MAKE) --no-print-directory pytest

# The static checks need .venv, and node_modules for buf: never Chromium nor the Node client's packages.
check: proto-check lint typecheck layers buf-lint docs-check ## static checks only (.venv, and node_modules for buf), and the docs site built strict

# systemd-analyze (Debian's systemd) and promtool (Debian's prometheus): installed as root when missing.
deploy-check: $(VENV)/.installed ## check deploy/ with each file's own tool: systemd-analyze, promtool, hadolint, kubernetes-validate
	scripts/check-deploy.sh

model: ## check the protocol models in model/ with SPIN: honest models pass, every bug switch is caught (installs spin as root)
	scripts/ensure-spin.sh
	model/check.sh

# Two processes (pytest-xdist), each with its own throwaway PostgreSQL: most of the suite waits on
# servers, subprocesses and the database, so two share two cores well. One file's tests stay in one
# process, the reliability suite whole in one (tests/conftest.py). PYTEST_WORKERS=0 runs in one process.
PYTEST_WORKERS ?= 2
pytest: setup ## the test suite (starts its own PostgreSQL unless DATABASE_URL is set)
	$(PY) -m pytest -n $(PYTEST_WORKERS)

reliability-async: setup ## the failover scenario with an ASYNCHRONOUS standby: reports what it lost, asserts nothing
	$(PY) -m pytest tests/reliability/test_failover.py -m failover_async

lint: $(VENV)/.installed ## ruff
	$(VENV)/bin/ruff check server tests clients/python clients/edge bench scripts
	$(VENV)/bin/ruff format --check server tests clients/python clients/edge bench scripts

typecheck: $(VENV)/.installed ## mypy --strict over the code and the tests
	$(VENV)/bin/mypy server/inboxd tests clients/python/src/inboxd_client clients/edge/src/inboxd_edge scripts

layers: $(VENV)/.installed ## import-linter: every package in its layer (pyproject.toml), psycopg only in the store, no import circles
	$(VENV)/bin/lint-imports
	$(PY) scripts/no_import_cycles.py

buf-lint: node_modules/.installed ## buf lint on protos/
	npx --no-install buf lint

# The contract as it landed; move it forward when a contract lands. 3774fea: the language options
# (go_package, java_package, java_multiple_files, csharp_namespace), which buf's FILE rules report as
# changed from unset; against 427502c nothing else was (no field, message or method changed incompatibly).
BUF_BASELINE ?= 3774fea
buf-breaking: node_modules/.installed ## buf breaking: protos/ against the contract at BUF_BASELINE (needs that commit in the clone)
	npx --no-install buf breaking --against '.git#ref=$(BUF_BASELINE),depth=1000'

proto: $(VENV)/.installed ## regenerate the Python stubs from protos/
	scripts/gen_proto.sh

proto-check: $(VENV)/.installed ## fail if regenerating the stubs would change them
	@tmp=$$(mktemp -d) && scripts/gen_proto.sh $$tmp && \
	  diff -r -x __pycache__ $$tmp clients/python/src/inboxd_client/v1 >/dev/null || \
	  { echo "generated stubs are stale: run 'make proto' and commit"; rm -rf $$tmp; exit 1; }; \
	  rm -rf $$tmp; echo "stubs are current"

# Benchmarks: never part of test or CI. Their extras are installed here, not by setup.
$(VENV)/.bench-installed: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $@

# The Node peers of bench-peers (pg-boss, graphile-worker), pinned in their own lockfile.
PEERS_NODE := bench/peers-node
$(PEERS_NODE)/node_modules/.installed: $(PEERS_NODE)/package.json $(PEERS_NODE)/package-lock.json
	npm ci --prefix $(PEERS_NODE) --no-audit --no-fund --loglevel=error
	touch $@

bench: setup $(VENV)/.bench-installed ## benchmark inboxd against raw PostgreSQL, with profiles (~20 min, never in CI); writes docs/benchmarks.md
	$(PY) -m bench run

bench-peers: setup $(VENV)/.bench-installed $(PEERS_NODE)/node_modules/.installed ## benchmark inboxd beside PgQueuer, Procrastinate, pg-boss and graphile-worker (~10 min); adds to docs/benchmarks.md
	$(PY) -m bench peers

.PHONY: bench-stats-sizes
bench-stats-sizes: setup ## Stats at 1, 5 and 10 million events, and the counting triggers' cost per write (~6 min, by hand); prints figures for docs/sizing.md
	$(PY) -m bench.stats_sizes 1000000 5000000 10000000

.PHONY: bench-quick
bench-quick: setup $(VENV)/.bench-installed $(PEERS_NODE)/node_modules/.installed ## smoke-test both benchmarks (~3 min); results in bench/results/quick/, never published
	$(PY) -m bench run --quick
	$(PY) -m bench peers --quick

# No registry needed: the Debian base is made locally with mmdebstrap unless BASE names one (scripts/build-image.sh).
.PHONY: image
image: $(VENV)/.installed podman ## the OCI image (Containerfile) with podman, from the release's wheels, no network in the build
	scripts/build-image.sh

.PHONY: release
release: $(VENV)/.installed ## versioned wheels and sdists, the Node package, the deploy files, deps/ and SHA256SUMS into dist/
	$(PY) scripts/release.py

clean: ## remove .venv, node_modules and the embedded database
	rm -rf $(VENV) node_modules .inboxd
