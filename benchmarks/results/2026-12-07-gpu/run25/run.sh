#!/usr/bin/env bash
# Run 25: where the HTTP 256 KiB row's time goes (1.69x tensorstore in run 24, below S3's 1.99x on the same
# chunks): profile_s3_zarr.py --device over HTTP and over S3, 256 KiB chunks, 7 reads each, twice, alternating.
# From the project root on the GPU machine (carry .whl and .gpu):
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-07-gpu/run25/run.sh
set -uo pipefail
out=${OUT:-run25-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_parts.so.gz > gdsstore/_core.abi3.so
for proto in http s3 http s3; do
  flag=""; [ $proto = http ] && flag="--http"
  echo "-- $proto" >>"$out/profile_256k.txt"
  timeout 90 python3 benchmarks/profile_s3_zarr.py --device $flag --chunk 256 --nginx-workers 8 --rounds 7 --no-profile \
    >>"$out/profile_256k.txt" 2>&1
  echo "rc=$? $proto"; tail -n 30 "$out/profile_256k.txt" | grep -E "GB/s, |^(read|h2d|scatter|decode) " | cut -c1-260
done
