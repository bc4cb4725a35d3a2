#!/usr/bin/env bash
# The whole test suite: set-up (venv, Python deps and the package with its native core, nginx for the HTTP
# tests), lint (ruff), types (mypy) and import contracts while the core compiles (scripts/lint.sh), the native
# core's checks (scripts/build_core.sh: cargo fmt, clippy, unit tests), then pytest on one worker per core and one more: unit, property, conformance (zarr StoreTests, fsspec abstract suites), servers over loopback (moto S3, nginx, our WebHDFS
# and fault-injecting servers), docs build (Sphinx, -W -n, notebooks executed, the site left in
# docs/_build/html), the built site checked in headless Chromium, docs code blocks. GPU tests skip here
# with their reason; on a GPU machine: pytest -m gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
# The suite starts hundreds of interpreters (subprocess tests, servers, kernels, workers): with bytecode
# written once, each loads zarr, botocore or moto from it instead of compiling their sources again.
unset PYTHONDONTWRITEBYTECODE
# The set-up compiles the native core while the Python packages install (scripts/bootstrap.sh); the linters
# (scripts/lint.sh: ruff, mypy, lint-imports) run once those are in, beside the compile's last crates.
GDSSTORE_EXTRAS=${GDSSTORE_EXTRAS:-test,docs,s3,cufile} bash scripts/bootstrap.sh -- bash scripts/lint.sh
# cargo's checks of the core run while the system packages install and pytest runs, at the lowest priority: on
# the CPU pytest's workers leave idle (beside three workers at the same priority they took 265 s, not 94).
core_log=$(mktemp)
trap 'rm -f "$core_log"' EXIT
nice -n 19 bash scripts/build_core.sh --checks-only >"$core_log" 2>&1 &
core_pid=$!

# nginx serves the HTTP(S) range tests; install it from Debian's packages when missing.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
  if command -v apt-get >/dev/null 2>&1; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "test: installing nginx-light"
    $sudo apt-get install -y -q nginx-light >/dev/null 2>&1 \
      || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q nginx-light >/dev/null; }
  fi
fi

# Chromium and its WebDriver look at the built docs (tests/docs/site_check.py); Debian's packages as well.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "test: installing chromium and chromium-driver"
    $sudo apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null 2>&1 \
      || { $sudo apt-get update -q >/dev/null \
           && $sudo apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null; }
  fi
fi

export PATH="$PWD/.venv/bin:$PATH:/usr/sbin"
python -c 'from gdsstore.engine import native; assert native.load() is not None, native.unavailable_reason()'
# The core's checks finish while pytest runs: pytest waits on servers, subprocesses and the network much of the
# time, so the two share the 2 cores better than one after the other. A failed check fails the command after.
core_checks() {
  echo "== native core (cargo fmt, clippy, unit tests)"
  core_status=0
  wait "$core_pid" || core_status=$?
  cat "$core_log"
  [ "$core_status" = 0 ] || { echo "test: the native core's checks failed (above)" >&2; return "$core_status"; }
}
# One pytest-xdist worker more than the cores (3 on the 2-core machine): with as many as the cores, a sixth of
# the CPU sat idle while workers waited on servers and subprocesses (pytest alone with warm caches: 296 s against
# 360; in the whole command, within the machine's noise). A whole test file per worker, so each file's servers
# and module fixtures are made once. Tests count events, never seconds: speed lives in benchmarks/. With
# arguments, one run with them (`bash scripts/test.sh tests/docs -n 0`).
workers=$(( $(nproc) + 1 ))
pytest_status=0
if [ "$#" -gt 0 ]; then
  pytest -p no:cacheprovider -n "$workers" --dist loadfile "$@" || pytest_status=$?
else
  echo "== pytest ($workers workers)"
  # the slowest tests listed at the end: where the command's minutes go, in every CI log
  pytest -p no:cacheprovider -n "$workers" --dist loadfile --durations=25 || pytest_status=$?
fi
core_checks
exit "$pytest_status"
