#!/usr/bin/env bash
# Build the native core (native/, the gdsstore-core wheel) and install it into .venv; skipped when the
# sources did not change since the last install (a stamp holds a hash of them). Runs clippy and fmt --check.
# Usage: bash scripts/build_core.sh [--force]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY="$ROOT/.venv/bin/python"
CRATE="$ROOT/native"
STAMP="$CRATE/target/.installed-stamp"

command -v cargo >/dev/null || { echo "build_core.sh: cargo not found (install the Rust toolchain)" >&2; exit 1; }
[ -x "$PY" ] || { echo "build_core.sh: $PY missing (run scripts/bootstrap.sh first)" >&2; exit 1; }

hash_sources() {
    (cd "$CRATE" && find Cargo.toml Cargo.lock pyproject.toml gdsstore_core.pyi src -type f -print0 | sort -z \
        | xargs -0 sha256sum; cargo --version; "$PY" -c 'import sys; print(sys.version)') | sha256sum | cut -d' ' -f1
}

want=$(hash_sources)
if [ "${1:-}" != "--force" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
    && "$PY" -c 'import gdsstore_core' 2>/dev/null; then
    echo "build_core.sh: gdsstore_core is up to date"
    exit 0
fi

# The venv's maturin, else one on PATH that runs (a pyenv shim may not), else install it into the venv.
MATURIN="$ROOT/.venv/bin/maturin"
if ! "$MATURIN" --version >/dev/null 2>&1; then
    MATURIN=$(command -v maturin || true)
    if [ -z "$MATURIN" ] || ! "$MATURIN" --version >/dev/null 2>&1; then
        "$PY" -m pip install -q 'maturin>=1.5,<2'
        MATURIN="$ROOT/.venv/bin/maturin"
    fi
fi

start=$(date +%s)
(cd "$CRATE" && cargo fmt --check && cargo clippy --locked --release -q -- -D warnings)
rm -rf "$CRATE/target/wheels"
(cd "$CRATE" && "$MATURIN" build --release --locked -q -i "$PY" -o "$CRATE/target/wheels")
"$PY" -m pip install -q --force-reinstall --no-deps "$CRATE"/target/wheels/gdsstore_core-*.whl
"$PY" -c 'import gdsstore_core'
echo "$want" > "$STAMP"
echo "build_core.sh: gdsstore_core built and installed in $(( $(date +%s) - start )) s"
