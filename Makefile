# Markus: `make run` starts everything on the embedded default; `make test` runs the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test check test-sqlite test-pg bench clean

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
# recovery, cursors, events) again on PostgreSQL with Redis. The two passes share no
# database and run side by side (much of each is waiting on workers and servers); each
# one's output is printed whole when it ends.
test: install check
	$(MAKE) --no-print-directory -j2 --output-sync=target test-sqlite test-pg

check: install
	PYTHONPATH=. $(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test-sqlite:
	$(PY) -m pytest -q -m "not redis and not postgres"

test-pg:
	@if [ -n "$$MARKUS_TEST_PG_URL" ]; then \
		DATABASE_URL="$$MARKUS_TEST_PG_URL" REDIS_URL="$$MARKUS_TEST_REDIS_URL" $(PY) -m pytest -q -m "pg or redis or postgres"; \
	elif [ "$$CI" = "true" ]; then \
		echo "CI=true but MARKUS_TEST_PG_URL is not set: the PostgreSQL pass cannot run" >&2; exit 1; \
	else \
		echo "PostgreSQL pass not run: set MARKUS_TEST_PG_URL (and REDIS_URL) to run it"; \
	fi

bench: install
	$(PY) manage.py bench all

clean:
	rm -rf $(VENV) var
