#!/usr/bin/env bash
# The H200 measurements the sessions of 2026-12-02 had no device time for, in one device call of under
# 10 minutes (results in $OUT); the slowest unknowns first, so a cut run still leaves them:
#   1. the archive benchmark to its end (issue #25's 20x target), 64 KiB and 1 MiB chunks, local, HTTP and
#      S3 (nginx, path-style), every anchor in the run; the anchors read once each (one read of a slow
#      anchor takes seconds), gdsstore three times; results rewritten after every round;
#   2. where an S3 64 KiB zarr read's time goes on the GPU (benchmarks/profile_s3_zarr.py: per chunk, trace,
#      cProfile), the row furthest from its target (0.83x tensorstore, about 50 us per chunk);
#   3. the GPU tests of what changed without a GPU: the stream-order write test (never run on a GPU), the one
#      read-ahead loop (gpu.execute.run_windows, now also the archive reader's), the core's shared gates.
# The memory sweep (issue #23) is a second call: python3 benchmarks/memory_bench.py --help
# Run (from the repository root, the core's wheel and nginx carried: .whl/, .gpu/):
#   source .gpu/prelude.sh; bash benchmarks/gpu_pending.sh
set -uo pipefail
out=${OUT:-gpu-pending}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
[ -x .gpu/bin/nginx ] && export PATH="$PWD/.gpu/bin:$PATH"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -c 'import gdsstore_core' || echo "gpu_pending: the native core is not installed (the remote rows use Python)"

archives() {  # $1: chunk (64k, 1m), $2: timeout in seconds
  echo "== archives, $1 chunks"
  timeout "$2" python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --chunk "$1" --http --s3 \
    --nginx-workers 8 --rounds 3 --anchor-rounds 1 --skip "VirtualStore+zarr,VirtualStore+enable_pipeline" \
    --out "$out/archives_$1.json" >"$out/archives_$1.log" 2>&1
  echo "rc=$?"; grep -v -i warn "$out/archives_$1.log" | grep "^|\|differ\|Error" | cut -c1-300 | head -n 24
}
archives 64k 190
archives 1m 140

echo "== S3 64 KiB zarr read, profiled"
timeout 70 python3 benchmarks/profile_s3_zarr.py --device --chunk 128 --nginx-workers 8 \
  --out "$out/profile_s3_64k.txt" >"$out/profile_s3_64k.log" 2>&1
echo "rc=$?"; head -n 40 "$out/profile_s3_64k.txt"

echo "== GPU tests"
timeout 140 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline \
  tests/engine/test_stream_order.py tests/archives tests/remote tests/adapters/test_zarr_store_gpu.py \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
