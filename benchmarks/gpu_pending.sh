#!/usr/bin/env bash
# What the next device session should start from, in one call of under 10 minutes (results in $OUT): every
# change of 2026-12-03 ran on the H200 (benchmarks/results/2026-12-03-h200), so this is the baseline, not a
# verification:
#   1. the GPU tests (the archive tests ran there on 2026-12-03, run 5: left out, their wheels are large);
#   2. the remote zarr rows of issue 24 (S3 and HTTP over nginx, every anchor in the run; they last ran on
#      2026-12-02: S3 64 KiB 0.83x, 256 KiB 1.70x, shards 1.65x the best anchor, target 2x);
#   3. where a 1 GiB read's time goes, window by window (probe_timeline.py).
# Carry .whl (fetch-wheels.sh base nvcomp anchors and the core's wheel; nvCOMP's nvlzcat removed to fit) and
# .gpu (nginx in .gpu/bin, botocore trimmed to its s3/sts/sso data in .gpu/py). Run from the repository root:
#   source .gpu/prelude.sh; bash benchmarks/gpu_pending.sh
set -uo pipefail
out=${OUT:-gpu-pending}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
export PATH="$PWD/.gpu/bin:$PATH"
[ -x .gpu/bin/nginx ] && export PATH="$PWD/.gpu/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE  # the machine sets it: every process would compile the package's sources
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
python3 -c 'import gdsstore_core' || echo "gpu_pending: the native core is not installed (the remote rows use Python)"

echo "== GPU tests"
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline \
  tests/engine/test_stream_order.py tests/adapters/test_zarr_store_gpu.py \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12

echo "== remote zarr rows (nginx as S3 and HTTP)"
timeout 300 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 3 \
  --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
echo "rc=$?"; grep "^|" "$out/remote_zarr.log" | cut -c1-400

echo "== probe_timeline.py"
timeout 100 python3 benchmarks/probe_timeline.py >"$out/probe_timeline.txt" 2>&1
echo "rc=$?"; grep -E "budget|mallocs|Error" "$out/probe_timeline.txt" | cut -c1-140 | head -n 30
