#!/usr/bin/env bash
# What the next device session should start from, in one call of under 10 minutes (results in $OUT): every
# change of 2026-12-03 ran on the H200 (benchmarks/results/2026-12-03-h200), so this is the baseline, not a
# verification:
#   1. the GPU tests, the archive tests among them (carry VirtualiZarr, kerchunk, obspec-utils, h5py and
#      netCDF4 wheels in .whl: the 2026-12-03 calls did not, and those tests failed on the imports);
#   2. where a 1 GiB read's time goes, window by window (probe_timeline.py);
#   3. the archive benchmark's 1 MiB rows (S3 as one dataset was 17.3x the best anchor, target 20x; the
#      first window's landing overlaps nothing there).
# Run (from the repository root, the core's wheel and nginx carried: .whl/, .gpu/):
#   source .gpu/prelude.sh; bash benchmarks/gpu_pending.sh
set -uo pipefail
out=${OUT:-gpu-pending}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
[ -x .gpu/bin/nginx ] && export PATH="$PWD/.gpu/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE  # the machine sets it: every process would compile the package's sources
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
python3 -c 'import gdsstore_core' || echo "gpu_pending: the native core is not installed (the remote rows use Python)"

echo "== GPU tests"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline \
  tests/engine/test_stream_order.py tests/archives tests/adapters/test_zarr_store_gpu.py \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12

echo "== probe_timeline.py"
timeout 170 python3 benchmarks/probe_timeline.py >"$out/probe_timeline.txt" 2>&1
echo "rc=$?"; grep -E "budget|mallocs|Error" "$out/probe_timeline.txt" | cut -c1-140 | head -n 30

echo "== archives, 1 MiB chunks"
timeout 170 python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --chunk 1m --http --s3 \
  --nginx-workers 8 --rounds 3 --anchor-rounds 1 --skip "VirtualStore+zarr,VirtualStore+enable_pipeline" \
  --out "$out/archives_1m.json" >"$out/archives_1m.log" 2>&1
echo "rc=$?"; grep "^|" "$out/archives_1m.log" | cut -c1-300
