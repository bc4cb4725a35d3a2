#!/usr/bin/env bash
# Build the native core (native/, the gdsstore-core wheel) and install it into .venv; skipped when the
# sources did not change since the last install (a stamp holds a hash of them). Runs fmt --check, clippy
# (the tests too) and the crate's unit tests.
# Usage: bash scripts/build_core.sh [--force | --compile-only]
#   --compile-only: check, test and build, install nothing; needs no .venv (it uses the Python bootstrap.sh
#   would make it with), so scripts/test.sh runs it while bootstrap.sh installs. With maturin at hand it builds
#   the wheel, which the next plain run installs without building again when the sources are the same;
#   without (a fresh machine, before the set-up installs it) it compiles the release dependencies only.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY="$ROOT/.venv/bin/python"
CRATE="$ROOT/native"
STAMP="$CRATE/target/.installed-stamp"
BUILT="$CRATE/target/.built-stamp"  # the hash of the sources of the wheel in target/wheels
mode=${1:-}

command -v cargo >/dev/null || { echo "build_core.sh: cargo not found (install the Rust toolchain)" >&2; exit 1; }
if [ "$mode" = --compile-only ] && [ ! -x "$PY" ]; then
  PY=$(bash scripts/bootstrap.sh --python)  # abi3: the wheel is the same for every Python >= 3.12
fi
[ -x "$PY" ] || { echo "build_core.sh: $PY missing (run scripts/bootstrap.sh first)" >&2; exit 1; }
# PyO3's build configuration: this Python for clippy and the tests as for maturin (one configuration, not
# PATH's python3, which may be older than the abi3 floor).
export PYO3_PYTHON="$PY"

hash_sources() {
    (cd "$CRATE" && find Cargo.toml Cargo.lock pyproject.toml gdsstore_core.pyi src -type f -print0 | sort -z \
        | xargs -0 sha256sum; cargo --version; "$PY" -c 'import sys; print(sys.version)') | sha256sum | cut -d' ' -f1
}

want=$(hash_sources)
install() {
    "$PY" -m pip install -q --force-reinstall --no-deps "$CRATE"/target/wheels/gdsstore_core-*.whl
    "$PY" -c 'import gdsstore_core'
    echo "$want" > "$STAMP"
}
if [ "$mode" != --force ] && [ "$mode" != --compile-only ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
    && "$PY" -c 'import gdsstore_core' 2>/dev/null; then
    echo "build_core.sh: gdsstore_core is up to date"
    exit 0
fi
if [ -z "$mode" ] && [ -f "$BUILT" ] && [ "$(cat "$BUILT")" = "$want" ] \
    && compgen -G "$CRATE/target/wheels/gdsstore_core-*.whl" >/dev/null; then
    install
    echo "build_core.sh: gdsstore_core installed (the wheel built before, from these sources)"
    exit 0
fi

# The venv's maturin, else one on PATH that runs (a pyenv shim may not), else install it into the venv.
MATURIN="$ROOT/.venv/bin/maturin"
if ! "$MATURIN" --version >/dev/null 2>&1; then
    MATURIN=$(command -v maturin || true)
    if [ -z "$MATURIN" ] || ! "$MATURIN" --version >/dev/null 2>&1; then
        if [ "$mode" = --compile-only ]; then
            MATURIN=""  # none yet (the set-up installs it): cargo compiles, the wheel comes after the set-up
        else
            "$PY" -m pip install -q 'maturin>=1.5,<2'
            MATURIN="$ROOT/.venv/bin/maturin"
        fi
    fi
fi

start=$(date +%s)
# Lints and unit tests of the crate (its tests too: --all-targets); cargo test shares the release deps.
(cd "$CRATE" && cargo fmt --check && cargo clippy --locked --release --all-targets -q -- -D warnings \
    && cargo test --locked --release -q)
rm -rf "$CRATE/target/wheels" "$BUILT"
if [ -z "$MATURIN" ]; then
    # maturin's build (same profile and features) finds every dependency compiled: only the crate is left.
    (cd "$CRATE" && cargo build --locked --release --lib -q)
    echo "build_core.sh: gdsstore_core compiled in $(( $(date +%s) - start )) s (the wheel after the set-up)"
    exit 0
fi
(cd "$CRATE" && "$MATURIN" build --release --locked -q -i "$PY" -o "$CRATE/target/wheels")
echo "$want" > "$BUILT"
if [ "$mode" = --compile-only ]; then
    echo "build_core.sh: gdsstore_core built in $(( $(date +%s) - start )) s (not installed: --compile-only)"
    exit 0
fi
install
echo "build_core.sh: gdsstore_core built and installed in $(( $(date +%s) - start )) s"
