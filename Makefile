# agentsite — the commands docs/development.md documents ("Make targets"). Needs GNU make and Python 3.11.
#
#   make run            create/update .venv, migrate, serve on HOST:PORT (127.0.0.1:8000)
#   make test           create/update .venv with test deps, run pytest PYTEST_ARGS
#   make test-postgres  the same against the local PostgreSQL (TEST_POSTGRES_URL)
#   make lint           ruff check, ruff format --check and mypy (pyproject.toml); all three always run
#   make migrate        apply migrations (business + checkpointer tables)
#   make api-key NAME=alice   create an API key (printed once)
#   make bench          agentsite vs bare LangGraph, langgraph-api and Aegra (BENCH_ARGS, e.g. --smoke)
#   make clean          remove install stamps, data/ (the SQLite database!) and build leftovers
#   make distclean      clean + remove .venv
#
# Everything honours DATABASE_URL (default: SQLite file under data/).

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV     := .venv
VENV_PY  := $(VENV)/bin/python
PIP      := $(VENV_PY) -m pip --disable-pip-version-check
PIP_FLAGS ?= -q

# Stamps live inside .venv: a recreated venv starts without them and reinstalls.
RUN_STAMP := $(VENV)/.agentsite-run-installed
DEV_STAMP := $(VENV)/.agentsite-dev-installed

# Interpreter used to create .venv; empty = python3.11, falling back to python3.
PYTHON ?=
HOST ?= 127.0.0.1
PORT ?= 8000
PYTEST_ARGS ?=
BENCH_ARGS ?=
TEST_POSTGRES_URL ?= postgres://postgres@127.0.0.1:5432/postgres

.PHONY: help venv venv-dev run test test-postgres lint bench migrate api-key clean distclean data-dir

help:
	@sed -n '3,14s/^# \{0,1\}//p' $(firstword $(MAKEFILE_LIST))

# --- virtualenv ------------------------------------------------------------------

# Also rebuilds a venv whose interpreter vanished (dangling bin/python symlink).
$(VENV_PY):
	@py=""; \
	for c in $(PYTHON) python3.11 python3; do \
	  if "$$c" -c 'import sys' >/dev/null 2>&1; then py="$$c"; break; fi; \
	done; \
	if [ -z "$$py" ]; then echo "make: no working python3.11 or python3 found on PATH" >&2; exit 1; fi; \
	if ! "$$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
	  echo "make: warning: $$py is $$("$$py" -c 'import platform; print(platform.python_version())'); agentsite is tested on Python 3.11" >&2; \
	fi; \
	echo "creating $(VENV) with $$py ($$("$$py" -c 'import platform; print(platform.python_version())'))"; \
	"$$py" -m venv --clear $(VENV)

$(RUN_STAMP): requirements.txt $(VENV_PY)
	@echo "installing requirements.txt into $(VENV)"
	$(PIP) install $(PIP_FLAGS) -r requirements.txt
	@touch $@

# requirements-dev.txt includes requirements.txt, so it satisfies the run stamp too.
$(DEV_STAMP): requirements-dev.txt requirements.txt $(VENV_PY)
	@echo "installing requirements-dev.txt into $(VENV)"
	$(PIP) install $(PIP_FLAGS) -r requirements-dev.txt
	@touch $@ $(RUN_STAMP)

venv: $(RUN_STAMP)
venv-dev: $(DEV_STAMP)

# The default SQLite file lives in AGENT_DATA_DIR (default data/), which a fresh
# clone does not have (data/ is git-ignored).
data-dir:
	@mkdir -p "$${AGENT_DATA_DIR:-data}"

# --- the service ---------------------------------------------------------------

# A second server on the SQLite file is refused first, before migrate touches it.
run: $(RUN_STAMP) data-dir
	@$(VENV_PY) -m agentsite.cli
	$(VENV_PY) manage.py migrate --noinput
	$(VENV_PY) manage.py runserver $(HOST):$(PORT)

migrate: $(RUN_STAMP) data-dir
	$(VENV_PY) manage.py migrate --noinput

api-key: $(RUN_STAMP) data-dir
	@if [ -z "$(NAME)" ]; then echo "usage: make api-key NAME=alice" >&2; exit 2; fi
	@$(VENV_PY) manage.py migrate --noinput -v 0
	@$(VENV_PY) manage.py create_api_key "$(NAME)"

# --- tests -----------------------------------------------------------------------

# pytest's exit status is the recipe's; 5 (no tests collected) is reported as a
# failure. If PYTEST_RC_FILE is set, pytest's exit status is also written there
# (.ci/run uses it to tell install failures from test failures).
test: $(DEV_STAMP) data-dir
	$(info $(VENV)/bin/pytest $(PYTEST_ARGS))
	@db="$${DATABASE_URL:-}"; \
	if [ -n "$$db" ]; then db=$$(printf '%s' "$$db" | sed -E 's#//([^:/@]+):[^@]*@#//\1:***@#'); \
	else db="(unset: SQLite file under $${AGENT_DATA_DIR:-data}/)"; fi; \
	echo "DATABASE_URL=$$db"; \
	rc=0; $(VENV)/bin/pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ -n "$${PYTEST_RC_FILE:-}" ]; then echo "$$rc" > "$$PYTEST_RC_FILE"; fi; \
	if [ "$$rc" -eq 5 ]; then echo "make test: pytest collected no tests (exit 5) -- a suite that runs nothing is a failure" >&2; fi; \
	exit $$rc

# pytest-django creates (and drops) the test_postgres database itself.
test-postgres:
	@DATABASE_URL='$(TEST_POSTGRES_URL)' $(MAKE) --no-print-directory test

# --- lint and types ------------------------------------------------------------

# Each check runs even when one before it failed; the status is non-zero if any
# did. mypy's Django plugin loads tests.settings, hence the data folder.
lint: $(DEV_STAMP) data-dir
	@rc=0; \
	echo "$(VENV)/bin/ruff check ."; $(VENV)/bin/ruff check . || rc=1; \
	echo "$(VENV)/bin/ruff format --check ."; $(VENV)/bin/ruff format --check . || rc=1; \
	echo "$(VENV)/bin/mypy"; $(VENV)/bin/mypy || rc=1; \
	exit $$rc

# --- benchmark -------------------------------------------------------------------

# Starts its own daphne processes and creates (then drops) its own databases on
# the PostgreSQL at BENCH_POSTGRES_URL (default: the local one); a few minutes
# with --peers none. With --peers (the default, all) it installs langgraph-api
# and Aegra into their own virtualenvs under .bench-venvs/ (never into .venv)
# and starts them: then about 30 minutes for the default 3 rounds (--rounds N).
# One table on stdout, figures in artifacts/bench.json.
bench: $(DEV_STAMP)
	$(VENV_PY) -m bench.run $(BENCH_ARGS)

# --- housekeeping ----------------------------------------------------------------

# Deletes data/ -- the default SQLite database with every session and API key --
# without asking. Only ./data is removed, never a custom AGENT_DATA_DIR.
clean:
	rm -f $(RUN_STAMP) $(DEV_STAMP)
	rm -rf data staticfiles .pytest_cache

distclean: clean
	rm -rf $(VENV)
