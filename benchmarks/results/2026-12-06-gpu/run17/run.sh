#!/usr/bin/env bash
# Run 17 of 2026-12-06 (fourth session): whether a remote zarr read on the GPU gains from more, smaller windows
# (the next window's wave then runs while this one's bytes are copied to the device and scattered, which run 16's
# phases show happen after the wave, 6-8 ms of a 37 ms read): run 15's phases probe, three reads back to back per
# row, at gpu.memory_budget 4 GiB (one window), 1 GiB, 512 MiB and 256 MiB, each in a fresh process; then the
# 1 GiB-budget zstd row with nvCOMP alone (learned scratch) against the split forced, on the same instance.
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH PATH=$PWD/.gpu/bin:$PATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run17/run.sh
# (BUDGETS and ROWS narrow the first part: the device time left was short.) Ran in the fifth session, first the GPU
# tests of the split and nvCOMP's C API (three changes made after run 16), with the core of ef96c4b (the ramp as
# committed: a970465).
set -uo pipefail
out=${OUT:-run17-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_cur.so.gz > gdsstore/_core.abi3.so
echo "== GPU tests of the split and the C API ($(date +%T))"
timeout 70 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline/test_nvcomp_capi.py \
  tests/gpu_pipeline/test_decode_split.py tests/gpu_pipeline/test_decode_raw.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed|Error" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 8
for b in ${BUDGETS:-4294967296 1073741824 536870912 268435456}; do
  echo "== gpu.memory_budget $((b >> 20)) MiB ($(date +%T))"
  GDSSTORE_GPU__MEMORY_BUDGET=$b PROBE_ROWS="${ROWS:-HTTP 256 KiB,HTTP 256 KiB zstd,S3 64 KiB}" PROBE_GAPS=0,0,0 \
    timeout 60 python3 benchmarks/results/2026-12-06-gpu/run15/probe_remote_phases.py 2>&1 | cut -c1-260
done | tee "$out/windows.txt"
# The 1 GiB-budget row on this instance: nvCOMP alone once the first read learned the scratch (as committed), the
# same with the split forced (gpu.host_decode_chunks 128 > the 67 chunks a window holds), and the 4 GiB default.
probe=benchmarks/results/2026-12-06-gpu/run13/probe_budget_learn.py
mkdir -p /root/probe; timeout 50 python3 $probe /root/probe 4294967296 2>&1 | tail -n 1
for v in "1073741824 64" "1073741824 128" "4294967296 64"; do set -- $v
  GDSSTORE_GPU__HOST_DECODE_CHUNKS=$2 timeout 40 python3 $probe /root/probe $1 2>&1 | tail -n 4 | sed "s/^/host_decode_chunks $2, /" | cut -c1-260
done | tee "$out/budget.txt"
