#!/usr/bin/env bash
# Install everything the tests need, then run them: bash scripts/test.sh [pytest args]
# On PostgreSQL: DATABASE_URL=postgres://postgres@127.0.0.1:5432/toolhub bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --test
export DJANGO_SECRET_KEY=${DJANGO_SECRET_KEY:-test-secret-key-not-for-production}
exec .venv/bin/python -m pytest "$@"
