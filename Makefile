# Belvedere: the two commands a newcomer needs are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
BELVEDERE_BIND ?= 127.0.0.1:8000
export BELVEDERE_BIND

# Integration profile: PostgreSQL and Redis on this machine (.ci/run starts them).
INTEGRATION_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/belvedere
INTEGRATION_BROKER_URL ?= redis://127.0.0.1:6379/15
# `make test` runs serially by default: on the 2-core CI machine two pytest-xdist processes took
# longer than one (35.5 min against ~27), the tests' own workers, stacks and Chromium already fill
# both cores. On a bigger machine: make test TEST_WORKERS=auto (one process per core) or TEST_WORKERS=4.
TEST_WORKERS ?= 0

.PHONY: help install run test test-integration bench clean

help:
	@echo "make run               set up and start the portal (web + worker + beat) on http://$(BELVEDERE_BIND)/"
	@echo "make test              set up and run the whole test suite (SQLite, filesystem broker, Chromium if installed),"
	@echo "                       (serially; TEST_WORKERS=auto runs one pytest-xdist process per core)"
	@echo "make test-integration  the suite against PostgreSQL and Redis ($(INTEGRATION_DATABASE_URL), $(INTEGRATION_BROKER_URL))"
	@echo "make bench             run the benchmarks under bench/ and print their table"

$(BIN)/.installed: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(BIN)/.installed-dev: requirements-dev.txt $(BIN)/.installed
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

install: $(BIN)/.installed

# The portal answers as soon as the database is migrated; the demo builds in the background (deploy/supervise.py),
# its progress on the login page. The demo lives while it runs: beat feeds it (DEMO_FEEDER, on unless set;
# DEMO_FEEDER=false make run keeps it as built).
run: $(BIN)/.installed
	$(BIN)/python manage.py migrate --noinput
	@echo
	@echo "Belvedere is starting on http://$(BELVEDERE_BIND)/  (Ctrl-C stops web, worker and beat; a crashed one restarts)"
	@echo "The demo system builds in the background (a minute or two; the login page shows how far it is), then worker and beat start."
	@case "$${DEMO_FEEDER:-true}" in [Ff]alse|FALSE|0|[Nn]o|[Oo]ff) ;; *) echo "The demo lives: its jobs move on and its GPUs keep reporting (DEMO_FEEDER=false make run keeps it still).";; esac
	@echo
	exec $(BIN)/python deploy/supervise.py --demo

# --dist loadgroup: the tests that share a singleton (Chromium, the private Slurm cluster) run on one
# worker (XDIST_GROUPS in tests/conftest.py). The integration profile stays serial: its workers would
# share one Redis broker.
test: $(BIN)/.installed-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test-integration: $(BIN)/.installed-dev
	DATABASE_URL=$(INTEGRATION_DATABASE_URL) CELERY_BROKER_URL=$(INTEGRATION_BROKER_URL) BELVEDERE_INTEGRATION=1 \
		$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(BIN)/.installed-dev
	$(BIN)/python bench/run.py

clean:
	rm -rf var staticfiles test-artifacts .pytest_cache
