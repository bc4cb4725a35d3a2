#!/usr/bin/env bash
# The whole test suite: set-up (venv, Python deps, nginx for the HTTP tests), the native core where there is
# one (scripts/build_core.sh), lint (ruff), types (mypy), then pytest on two workers: unit, property,
# conformance (zarr StoreTests, fsspec abstract suites), servers over loopback (moto S3, nginx, our WebHDFS
# and fault-injecting servers), docs build (Sphinx, -W -n, notebooks executed, the site left in
# docs/_build/html), the built site checked in headless Chromium, docs code blocks. GPU tests skip here
# with their reason; on a GPU machine: pytest -m gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
# The native core compiles while the Python packages install: on a fresh machine each takes minutes, one
# mostly on the cores and the other mostly on the network. Its output is shown once it is done.
core_pid="" core_log=""
if [ -f scripts/build_core.sh ] && command -v cargo >/dev/null 2>&1; then
  core_log=$(mktemp)
  trap 'rm -f "$core_log"' EXIT
  bash scripts/build_core.sh --compile-only >"$core_log" 2>&1 &
  core_pid=$!
fi
GDSSTORE_EXTRAS=${GDSSTORE_EXTRAS:-test,docs,s3,cufile} bash scripts/bootstrap.sh

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
# The native core (Rust), where the tree has it: its build script also runs cargo's own checks (clippy, fmt).
if [ -f scripts/build_core.sh ]; then
  echo "== native core"
  if [ -n "$core_pid" ]; then
    core_status=0
    wait "$core_pid" || core_status=$?
    cat "$core_log"
    rm -f "$core_log"
    [ "$core_status" = 0 ] || { echo "test: the native core did not build (above)" >&2; exit "$core_status"; }
  fi
  bash scripts/build_core.sh
fi
echo "== ruff"; ruff check .
echo "== mypy"; mypy
echo "== lint-imports"; lint-imports --no-cache
# Two workers on the 2-core machine (pytest-xdist), a whole test file per worker so each file's servers and
# module fixtures are made once; the tests that compare timings (marker `serial`) run after, alone.
# With arguments, one run with them (`bash scripts/test.sh tests/docs -n 0`: serial).
if [ "$#" -gt 0 ]; then
  exec pytest -p no:cacheprovider -n auto --dist loadfile "$@"
fi
echo "== pytest (2 workers)"
status=0
pytest -p no:cacheprovider -n auto --dist loadfile -m "not serial" || status=$?
echo "== pytest (timed tests, alone)"
pytest -p no:cacheprovider -m serial || { s=$?; [ "$s" = 5 ] || status=$s; }
# The remote tests once more through the pure-Python transport, as where the core is not built (test_wave.py
# runs both transports itself; test_core*.py test the core alone).
echo "== pytest (remote tests, native core off)"
GDSSTORE_REMOTE__CORE=off pytest -p no:cacheprovider -n auto --dist loadfile -m "not serial" tests/remote \
  --ignore=tests/remote/test_wave.py --ignore=tests/remote/test_core.py --ignore=tests/remote/test_core_writes.py \
  || status=$?
exit "$status"
