#!/usr/bin/env bash
# Install what toolhub needs into .venv (and, with --test, the test tools: npm packages, Chromium).
# Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
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
  # MCP Inspector CLI for the end-to-end tests (pinned in package.json / package-lock.json).
  if command -v npm >/dev/null && [ ! -x node_modules/.bin/mcp-inspector ]; then
    npm install --no-audit --no-fund --loglevel=error >/dev/null
  fi
  # Debian's Chromium for the browser tests (Playwright drives /usr/bin/chromium; it downloads nothing).
  if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    (apt-get install -y -qq chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }) >/dev/null
  fi
  # Debian's Redis for the rate-limit tests (tests/test_rate_limits_redis.py); .ci/run starts it.
  if ! command -v redis-server >/dev/null && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
    (apt-get install -y -qq redis-server >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq redis-server; }) >/dev/null
  fi
fi
