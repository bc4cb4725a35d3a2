#!/usr/bin/env bash
# The H200 measurements the session of 2026-12-02 (afternoon) had no device time for, in one device call of
# under 10 minutes (results in $OUT):
#   1. the GPU tests of what changed without a GPU: the stream-order write test (never run on a GPU), the one
#      read-ahead loop (gpu.execute.run_windows, now also the archive reader's), the core's shared gates;
#   2. where an S3 64 KiB zarr read's time goes on the GPU (benchmarks/profile_s3_zarr.py: per chunk, trace,
#      cProfile), the row furthest from its target (0.83x tensorstore, about 50 us per chunk);
#   3. the archive benchmark to its end, 64 KiB chunks, local, HTTP and S3 (issue #25's 20x target).
# The 1 MiB archive rows and the memory sweep (issue #23) fit a second call:
#   python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --chunk 1m --http --s3 --nginx-workers 8 \
#       --rounds 3 --out $OUT/archives_1m.json
#   python3 benchmarks/memory_bench.py --help
# Run (from the repository root, the core's wheel and nginx carried: .whl/, .gpu/):
#   source .gpu/prelude.sh; bash benchmarks/gpu_pending.sh
set -uo pipefail
out=${OUT:-gpu-pending}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
[ -x .gpu/bin/nginx ] && export PATH="$PWD/.gpu/bin:$PATH"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -c 'import gdsstore_core' || echo "gpu_pending: the native core is not installed (the remote rows use Python)"

echo "== 1. GPU tests"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/engine tests/archives \
  tests/gpu_pipeline tests/remote tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | tail -n 12

echo "== 2. S3 64 KiB zarr read, profiled"
timeout 90 python3 benchmarks/profile_s3_zarr.py --device --chunk 128 --nginx-workers 8 \
  --out "$out/profile_s3_64k.txt" >/dev/null 2>&1
head -n 12 "$out/profile_s3_64k.txt"

echo "== 3. archives, 64 KiB chunks"
timeout 300 python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --http --s3 --nginx-workers 8 \
  --rounds 3 --out "$out/archives_64k.json" >"$out/archives_64k.log" 2>&1
grep "^|" "$out/archives_64k.log" | head -n 20
