# Markus: `make run` starts everything on the embedded default; `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test check test-sqlite test-pg test-pg-suites test-faults pg-pass bench clean

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements.txt
	touch $@

install: $(VENV)/.installed

# Demo mode: the offline brain takes this long per turn, so a preempt, a merge and a
# cancel can be watched in the mind view (`make run MARKUS_OFFLINE_THINK_MS=0`: at once).
MARKUS_OFFLINE_THINK_MS ?= 1500

run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py demo
	MARKUS_OFFLINE_THINK_MS=$(MARKUS_OFFLINE_THINK_MS) $(PY) manage.py up --host $(HOST) --port $(PORT)

# The checks first (layers, lint, format, types), then the whole suite on SQLite and,
# where PostgreSQL is configured (always in CI), the suites marked `pg` (leases,
# recovery, cursors, events) again on PostgreSQL with Redis, the fault suite
# (tests/faults) in a process of its own beside them. The three share no database (each
# pytest process names its test database and Redis namespace by its pid; each fault
# scenario starts its own servers) and run side by side: much of each is waiting on
# workers, servers and leases. Each one's output is printed whole when it ends.
test: install check
	$(MAKE) --no-print-directory -j3 --output-sync=target test-sqlite test-pg

check: install
	PYTHONPATH=. $(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test-sqlite:
	$(PY) -m pytest -q -m "not redis and not postgres"

# The PostgreSQL pass: its suites and the fault suite, side by side under `make -j`.
test-pg: test-pg-suites test-faults

PG_PASS = "pg or redis or postgres"

test-pg-suites:
	@$(MAKE) --no-print-directory pg-pass PG_ARGS="--ignore=tests/faults"

test-faults:
	@$(MAKE) --no-print-directory pg-pass PG_ARGS="tests/faults"

pg-pass:
	@if [ -n "$$MARKUS_TEST_PG_URL" ]; then \
		DATABASE_URL="$$MARKUS_TEST_PG_URL" REDIS_URL="$$MARKUS_TEST_REDIS_URL" $(PY) -m pytest -q -m $(PG_PASS) $(PG_ARGS); \
	elif [ "$$CI" = "true" ]; then \
		echo "CI=true but MARKUS_TEST_PG_URL is not set: the PostgreSQL pass cannot run" >&2; exit 1; \
	else \
		echo "PostgreSQL pass not run: set MARKUS_TEST_PG_URL (and REDIS_URL) to run it"; \
	fi

bench: install
	$(PY) manage.py bench all

clean:
	rm -rf $(VENV) var
