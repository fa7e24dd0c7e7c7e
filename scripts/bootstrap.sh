#!/usr/bin/env bash
# Install what toolhub needs into .venv (and, with --test, the test tools: npm packages, Chromium).
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

# Python >= 3.11: $PYTHON when given, else the first of python3, python3.11, python3.12, python3.13 that is.
is_supported() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1; }
describe() { "$1" -c 'import sys; print("Python %d.%d.%d at %s" % (*sys.version_info[:3], sys.executable))'; }
if [ -n "${PYTHON:-}" ]; then
  if ! is_supported "$PYTHON"; then
    found=$("$PYTHON" --version 2>&1 || echo "not runnable")
    echo "toolhub needs Python 3.11 or newer; PYTHON=$PYTHON is: $found." >&2
    echo "Install Python 3.11+ and run again with PYTHON=/path/to/python3.11 (or unset PYTHON)." >&2
    exit 1
  fi
else
  for candidate in python3 python3.11 python3.12 python3.13; do
    if command -v "$candidate" >/dev/null && is_supported "$candidate"; then PYTHON=$candidate; break; fi
  done
  if [ -z "${PYTHON:-}" ]; then
    found=$(python3 --version 2>&1 || echo "no python3 on PATH")
    echo "toolhub needs Python 3.11 or newer; found: $found." >&2
    echo "Install Python 3.11+ (e.g. apt install python3.11 python3.11-venv, or pyenv) and run again," >&2
    echo "naming it if it is not on PATH: PYTHON=/path/to/python3.11 bash scripts/start.sh" >&2
    exit 1
  fi
fi
echo "Using $(describe "$PYTHON") (choose another with PYTHON=/path/to/python bash scripts/start.sh)."

# With --test: the MCP Inspector CLI for the end-to-end tests, and Chart.js whose built file tools_app/static keeps
# (the tests compare the two); pinned in package.json / package-lock.json. npm installs them while pip installs
# the Python packages below: both mostly wait on downloads (from a fresh clone, npm took 41 s of wall for 7.5 s
# of CPU).
npm_pid=""
if [ "${1:-}" = "--test" ] && command -v npm >/dev/null &&
  { [ ! -x node_modules/.bin/mcp-inspector ] || [ ! -f node_modules/chart.js/package.json ]; }; then
  npm install --no-audit --no-fund --loglevel=error >/dev/null &
  npm_pid=$!
fi

# A .venv left broken (an interrupted first run, an interpreter removed or too old, no pip) is rebuilt.
if [ -e .venv ] && ! { is_supported .venv/bin/python && .venv/bin/python -m pip --version >/dev/null 2>&1; }; then
  echo ".venv is broken or uses an unsupported Python: rebuilding it with $PYTHON."
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  if ! "$PYTHON" -m venv .venv; then
    rm -rf .venv
    echo "Could not create .venv with $PYTHON (on Debian/Ubuntu: apt install python3-venv, or python3.X-venv)." >&2
    exit 1
  fi
fi
if [ "${1:-}" = "--test" ]; then
  requirements=(-r requirements-dev.txt)  # includes the embedding extra
else
  requirements=(-r requirements.txt)
  # The embedding/hybrid search extra (an ONNX model, no PyTorch); TOOLHUB_EMBEDDING=0 leaves it out.
  if [ "${TOOLHUB_EMBEDDING:-1}" != "0" ]; then
    requirements+=(-r requirements-embedding.txt)
  fi
fi
stamp=".venv/.installed-$( (sha1sum requirements.txt requirements-embedding.txt requirements-dev.txt; echo "${requirements[*]}") | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check "${requirements[@]}"
  touch "$stamp"
fi

if [ "${1:-}" = "--test" ]; then
  # The npm packages (started above) are in place before the script ends.
  if [ -n "$npm_pid" ]; then wait "$npm_pid"; fi
  # Debian's Chromium for the browser tests (Playwright drives /usr/bin/chromium; it downloads nothing).
  if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    (apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }) >/dev/null
  fi
  # Debian's Redis for the rate-limit tests (tests/test_rate_limits_redis.py); .ci/run starts it.
  if ! command -v redis-server >/dev/null && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    (apt-get install -y -qq redis-server >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq redis-server; }) >/dev/null
  fi
fi
