#!/usr/bin/env bash
# Run 20 of 2026-12-07 (run 19's machine, warm): gpu.wave_copy_bytes 16 MiB (the default), 0 and 64 MiB, each in a
# fresh process, in turn, twice: run 15's phases probe, HTTP 256 KiB and S3 64 KiB, eight reads each (five back to
# back, three after 1.5 s idle). From the project root on the GPU machine (carry .whl, .gpu):
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-07-gpu/run20/run.sh
set -uo pipefail
out=${OUT:-run20-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_parts.so.gz > gdsstore/_core.abi3.so
for rep in 1 2; do
  for part in 16777216 0 67108864; do
    echo "== rep $rep gpu.wave_copy_bytes $part ($(date +%T))"
    GDSSTORE_GPU__WAVE_COPY_BYTES=$part PROBE_ROWS="HTTP 256 KiB,S3 64 KiB" PROBE_GAPS=0,0,0,0,0,1.5,1.5,1.5 \
      timeout 60 python3 benchmarks/results/2026-12-06-gpu/run15/probe_remote_phases.py 2>&1 | cut -c1-260
  done
done | tee "$out/phases_ab.txt"
