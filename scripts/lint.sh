#!/usr/bin/env bash
# The test command's linters: ruff, mypy and the import contracts (lint-imports). They read the sources and the
# installed Python packages, not the native core, so scripts/test.sh runs them while the core compiles
# (scripts/bootstrap.sh -- bash scripts/lint.sh). Alone: bash scripts/lint.sh (after a set-up).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff"; ruff check .
echo "== mypy"; mypy
echo "== lint-imports"; lint-imports --no-cache
