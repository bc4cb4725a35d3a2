#!/usr/bin/env bash
# Run 19 of 2026-12-07: remote waves copied to the GPU in parts while the wave runs (gpu.wave_copy_bytes, the
# core's read_table segments), in one device call (device starts were scarce): the GPU tests of the remote
# pipeline and device reads; run 15's phases probe (three reads back to back, HTTP 256 KiB and S3
# 64 KiB) with parts of 16 MiB (the default) and none (0: one copy after the wave, as before), each in a fresh
# process; one pass of the remote zarr rows, every anchor but s3fs, gdsstore under the default beside gdsstore
# with one copy after the wave (gpu.wave_copy_bytes 0), interleaved in every round. (Cut to fit the device time
# left after failed starts.) Added before it ran: the scatter's runs kernel (its GPU tests, the local pipeline's
# GPU tests, benchmarks/scatter_bench.py against the element kernel alone).
# From the project root on the GPU machine (carry .whl, .gpu; the core built from this commit in .gpu):
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-07-gpu/run19/run.sh
set -uo pipefail
out=${OUT:-run19-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_parts.so.gz > gdsstore/_core.abi3.so
echo "== GPU tests ($(date +%T))"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline/test_remote_pipeline.py \
  tests/remote/test_gpu_remote.py tests/engine/test_device_copy.py tests/gpu_pipeline/test_scatter_runs.py \
  tests/gpu_pipeline/test_gpu.py tests/gpu_pipeline/test_pipeline.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed|Error" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== scatter ($(date +%T))"
timeout 60 python3 benchmarks/scatter_bench.py --rounds 7 2>&1 | tee "$out/scatter.md" | cut -c1-300
for part in 16777216 0; do
  echo "== gpu.wave_copy_bytes $part ($(date +%T))"
  GDSSTORE_GPU__WAVE_COPY_BYTES=$part PROBE_ROWS="HTTP 256 KiB,S3 64 KiB" PROBE_GAPS=0,0,0 \
    timeout 35 python3 benchmarks/results/2026-12-06-gpu/run15/probe_remote_phases.py 2>&1 | cut -c1-300
done | tee "$out/phases.txt"
[ "${BENCH_SECONDS:-210}" != 0 ] || exit 0  # 0: no bench (the device time left was short)
echo "== bench ($(date +%T))"
timeout ${BENCH_SECONDS:-210} python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 2 \
  --no-single --gds-variant gpu.wave_copy_bytes=0 \
  --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
echo "rc=$?"; t="$out/remote_zarr.md"; [ -s "$t" ] || t="$out/remote_zarr.log"  # the rows printed as they ran
grep "^| nginx" "$t" | sed -E 's/, [0-9.]+ CPU-s\/GB//g; s/\| [^|]*$//' | cut -c1-400
echo "== done ($(date +%T))"
