#!/usr/bin/env bash
# Run 17 of 2026-12-06 (fourth session): whether a remote zarr read on the GPU gains from more, smaller windows
# (the next window's wave then runs while this one's bytes are copied to the device and scattered, which run 16's
# phases show happen after the wave, 6-8 ms of a 37 ms read): run 15's phases probe, three reads back to back per
# row, at gpu.memory_budget 4 GiB (one window), 1 GiB, 512 MiB and 256 MiB, each in a fresh process.
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH PATH=$PWD/.gpu/bin:$PATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run17/run.sh
set -uo pipefail
out=${OUT:-run17-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_cur.so.gz > gdsstore/_core.abi3.so
for b in 4294967296 1073741824 536870912 268435456; do
  echo "== gpu.memory_budget $((b >> 20)) MiB ($(date +%T))"
  GDSSTORE_GPU__MEMORY_BUDGET=$b PROBE_ROWS="HTTP 256 KiB,HTTP 256 KiB zstd,S3 64 KiB" PROBE_GAPS=0,0,0 \
    timeout 60 python3 benchmarks/results/2026-12-06-gpu/run15/probe_remote_phases.py 2>&1 | cut -c1-260
done | tee "$out/windows.txt"
