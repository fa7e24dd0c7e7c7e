#!/usr/bin/env bash
# Install everything the tests need, then run them: bash scripts/test.sh [pytest args]
# On PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/toolhub bash scripts/test.sh
# In parallel worker processes (pytest-xdist): TOOLHUB_TEST_WORKERS of them (default 3: many tests wait on a
# server or a subprocess, so one more than the 2 cores of the project's machines keeps them busy); 0 runs the
# suite in this one process. `--dist load` hands tests out in collection order, so pytest-django's order holds
# on every worker: the tests that flush the database (transaction=True) run after those that read the data the
# migrations put there (the `toolhub users` group). `--dist loadfile` breaks that order (measured: 140 tests
# then found no group).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --test
export DJANGO_SECRET_KEY=${DJANGO_SECRET_KEY:-test-secret-key-not-for-production}
workers=${TOOLHUB_TEST_WORKERS:-3}
# Bytecode caches are written (__pycache__/, git-ignored) even where the environment turns them off: every worker,
# live server and migration subprocess otherwise compiles each project module, and pytest rewrites each test
# module, again (measured: one collection of the suite, 28 s of CPU without the caches, 13 s with them).
unset PYTHONDONTWRITEBYTECODE
exec .venv/bin/python -m pytest -n "$workers" --dist load "$@"
