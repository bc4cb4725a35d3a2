#!/usr/bin/env bash
# Call 1 of the H200 session of 2026-12-03: the CPU route for zstd reads (one copy per window, and
# gpu.host_decode_chunks: reads whose nvCOMP calls would each decode few chunks), measured against nvCOMP:
#   1. the GPU tests;
#   2. probe_small_reads.py (warm reads of 1-64 MiB, both routes forced);
#   3. the budget sweep with every read on the GPU (gpu.host_decode_chunks 0) and with every read on the CPU
#      (gpu.host_decode_bytes 2^40), same processes and budgets.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200/run1/run.sh
set -uo pipefail
out=${OUT:-run1}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== GPU tests"
timeout 190 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline \
  tests/engine/test_stream_order.py tests/archives tests/adapters/test_zarr_store_gpu.py \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== probe_small_reads.py"
timeout 100 python3 benchmarks/probe_small_reads.py --reads 5 >"$out/probe_small_reads.txt" 2>&1
echo "rc=$?"; grep -v -i "warn\|return cls" "$out/probe_small_reads.txt" | tail -n 9
for route in gpu cpu; do
  echo "== budget sweep, every read on the $route"
  s='{"gpu.host_decode_chunks": 0}'; [ $route = cpu ] && s='{"gpu.host_decode_bytes": 1099511627776}'
  OUT="$out/sweep_$route" timeout 140 python3 benchmarks/memory_bench.py --quick --parts sweep --settings "$s" \
    >"$out/sweep_$route.log" 2>&1
  echo "rc=$?"; grep "^|" "$out/sweep_$route/memory.md" | cut -c1-200
done
