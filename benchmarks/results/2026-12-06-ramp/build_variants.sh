#!/usr/bin/env bash
# The three cores the ramp A/B compares, each in a copy of the package under /tmp/variants/pkg_<name>:
#   cur     the core as committed (native/ at HEAD)
#   noramp  the same with the ramp starting at the wave's concurrency (ramp.rs START = 4096, the one change)
#   old     the ramp of 5375749 (time to headers, a step kept at a 1.2x rise, idle = any gap)
#   prev    the ramp before edcc3e5 (back from idle at START, not at a quarter of the kept limit)
#   resume  back from idle at the kept limit itself (ramp.rs AFTER_IDLE = 1, the one change)
# NAMES (default "cur noramp old") picks which to build.
# Run from the project root; then: .venv/bin/python benchmarks/results/2026-12-06-ramp/ramp_ab.py cur,noramp,old 5
set -euo pipefail
root=$PWD; v=/tmp/variants; mkdir -p "$v"
export CARGO_TARGET_DIR=$v/target PYO3_PYTHON=$root/.venv/bin/python
for name in ${NAMES:-cur noramp old}; do
  rm -rf "$v/src_$name" "$v/pkg_$name"; mkdir -p "$v/src_$name" "$v/pkg_$name"
  cp -r native/src native/Cargo.toml native/Cargo.lock "$v/src_$name/"
  case $name in
    noramp) sed -i 's/^const START: usize = 2;/const START: usize = 4096;/' "$v/src_$name/src/ramp.rs" ;;
    old) git show 5375749:native/src/ramp.rs > "$v/src_$name/src/ramp.rs" ;;
    resume) sed -i 's/^const AFTER_IDLE: usize = 4;/const AFTER_IDLE: usize = 1;/' "$v/src_$name/src/ramp.rs" ;;
    prev) git show edcc3e5~1:native/src/ramp.rs > "$v/src_$name/src/ramp.rs" ;;
  esac
  (cd "$v/src_$name" && cargo build --release -q)
  cp -r gdsstore "$v/pkg_$name/"; cp "$CARGO_TARGET_DIR/release/lib_core.so" "$v/pkg_$name/gdsstore/_core.abi3.so"
done
