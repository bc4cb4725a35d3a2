#!/usr/bin/env bash
# The native core's release build and checks. The core (native/, Rust) is part of the gdsstore package:
# `pip install .` and `pip install -e .` (scripts/bootstrap.sh) build it with maturin (pyproject.toml,
# [tool.maturin]). This script compiles it first in native/target with the settings maturin builds with (the
# release profile, the extension-module feature, PYO3_PYTHON the .venv's Python), so pip's build finds every
# dependency compiled, then runs cargo's checks: fmt --check, clippy -D warnings (the tests too) and the
# crate's unit tests. scripts/bootstrap.sh builds with it (--build-only) while the Python packages download;
# scripts/test.sh then runs the checks alone (--checks-only: the set-up has just built and installed the core).
# Usage: bash scripts/build_core.sh [--build-only | --checks-only]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null \
  || { echo "build_core.sh: cargo not found: install the Rust toolchain (https://rustup.rs)" >&2; exit 1; }
PY="$PWD/.venv/bin/python"
[ -x "$PY" ] || PY=$(bash scripts/bootstrap.sh --python)
# PyO3's build configuration: one Python for this build, the tests and maturin's (a change rebuilds PyO3).
export PYO3_PYTHON="$PY"
cd native
start=$(date +%s)
if [ "${1:-}" != --checks-only ]; then  # the test command's set-up has just built and installed it
  cargo build --locked --release --lib -q --features pyo3/extension-module
  echo "build_core.sh: the core compiled in $(( $(date +%s) - start )) s"
fi
[ "${1:-}" = --build-only ] && exit 0
cargo fmt --check
cargo clippy --locked --release --all-targets -q -- -D warnings
cargo test --locked --release -q
echo "build_core.sh: checked (fmt, clippy, unit tests) in $(( $(date +%s) - start )) s"
