#!/usr/bin/env bash
# Install toolhub, create demo data on SQLite and serve everything on http://127.0.0.1:8000/
set -euo pipefail
cd "$(dirname "$0")/.."
# bootstrap.sh checks for Python >= 3.11 (PYTHON=/path/to/python to choose one) and rebuilds a broken .venv.
bash scripts/bootstrap.sh
export TOOLHUB_DEV=${TOOLHUB_DEV:-true}
if [ -z "${DJANGO_SECRET_KEY:-}" ]; then
  # A stable development key, kept beside the database so sessions survive restarts.
  [ -f .dev-secret-key ] || .venv/bin/python -c "import secrets; print(secrets.token_urlsafe(50))" > .dev-secret-key
  DJANGO_SECRET_KEY=$(cat .dev-secret-key)
  export DJANGO_SECRET_KEY
fi
.venv/bin/python manage.py migrate --noinput
# New tables are stored as rows; tables of a database made before that move once (resumable, and quick when
# none is left: docs/tables-at-scale.md, "Migration of existing tables").
.venv/bin/python manage.py tables_to_rows --all
# The demo key is kept in .demo-key and printed on every start while it works in this database; a fresh
# database (or a revoked key) gets a new one.
.venv/bin/python manage.py seed_demo --key-file .demo-key
PORT=${PORT:-8000}
echo
echo "toolhub is starting on http://127.0.0.1:${PORT}/admin/  (log in with the demo user above; Ctrl-C stops it)"
exec .venv/bin/uvicorn toolhub.asgi:application --host "${HOST:-127.0.0.1}" --port "$PORT" --lifespan on
