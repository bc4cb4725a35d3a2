#!/usr/bin/env bash
# Run 22 (prepared 2026-12-07, not yet run): the scatter's two kernels told apart (benchmarks/scatter_bench.py:
# 1 GiB outputs, blosc's byte segments, launches timed apart from the call); the GPU tests of the scatter, of remote
# device reads (the whole-object fallback through host memory) and of the copy in parts (over nginx); one 1 GiB
# object against kvikio; one pass of the remote zarr rows (four rounds). From the project root on the GPU machine
# (carry .whl, .gpu; the core of c1f0fae or later in .gpu/core_parts.so.gz):
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-07-gpu/run22/run.sh
set -uo pipefail
out=${OUT:-run22-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_parts.so.gz > gdsstore/_core.abi3.so
echo "== GPU tests ($(date +%T))"
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline/test_scatter_runs.py \
  tests/remote/test_gpu_remote.py tests/gpu_pipeline/test_blosc.py tests/gpu_pipeline/test_remote_pipeline.py \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 8
echo "== scatter ($(date +%T))"
timeout 150 python3 benchmarks/scatter_bench.py --rounds 7 2>&1 | tee "$out/scatter.md" | cut -c1-300
echo "== single ($(date +%T))"
timeout 100 python3 benchmarks/remote_bench.py --server nginx --repeat 5 --out "$out/single" >"$out/single.log" 2>&1
echo "rc=$?"; grep -E "^(gdsstore|kvikio)" "$out/single.log" | cut -c1-120; rm -rf "$out/single"
[ "${BENCH_SECONDS:-240}" != 0 ] || exit 0  # 0: no bench (the device time left was short)
echo "== bench ($(date +%T))"
timeout ${BENCH_SECONDS:-240} python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 \
  --rounds 4 --no-single --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
echo "rc=$?"; t="$out/remote_zarr.md"; [ -s "$t" ] || t="$out/remote_zarr.log"
grep "^| nginx" "$t" | sed -E 's/, [0-9.]+ CPU-s\/GB//g; s/\| [^|]*$//' | cut -c1-400
echo "== done ($(date +%T))"
