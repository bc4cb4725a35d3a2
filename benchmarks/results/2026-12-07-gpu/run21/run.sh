#!/usr/bin/env bash
# Run 21 of 2026-12-07 (run 19's machine, warm): the remote zarr rows, every anchor but s3fs, four interleaved
# rounds, gdsstore under the default (gpu.wave_copy_bytes 16 MiB) beside gdsstore with one copy after the wave (0)
# and with parts of 64 MiB. From the project root on the GPU machine (carry .whl, .gpu):
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-07-gpu/run21/run.sh
set -uo pipefail
out=${OUT:-run21-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_parts.so.gz > gdsstore/_core.abi3.so
timeout 330 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 4 \
  --no-single --gds-variant gpu.wave_copy_bytes=0 --gds-variant gpu.wave_copy_bytes=67108864 \
  --out "$out/remote_zarr_r4.md" > "$out/remote_zarr_r4.log" 2>&1
echo "rc=$?"; grep "^| nginx" "$out/remote_zarr_r4.log" | sed -E 's/, [0-9.]+ CPU-s\/GB//g; s/\| [^|]*$//' | cut -c1-500
