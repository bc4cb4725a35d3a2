#!/usr/bin/env bash
# Call 3 of the fifth H200 session of 2026-12-02: nvCOMP's exact zstd scratch for large chunks, windows sized
# by the scratch ratio seen, a read that fits the budget alone in one window, balanced windows: the GPU tests,
# where the time goes (probe_timeline.py), the budgets held (probe_budget.py), the memory benchmark.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-02-h200-s5/run3/run.sh
set -uo pipefail
out=${OUT:-run3}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
echo "== GPU tests"
timeout 170 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline \
  tests/engine/test_stream_order.py tests/archives tests/adapters/test_zarr_store_gpu.py \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== probe_timeline.py"
timeout 170 python3 benchmarks/probe_timeline.py >"$out/probe_timeline.txt" 2>&1
echo "rc=$?"; grep -E "budget|mallocs|Error" "$out/probe_timeline.txt" | cut -c1-140 | head -n 30
echo "== probe_budget.py"
timeout 90 python3 benchmarks/probe_budget.py >"$out/probe_budget.txt" 2>&1
echo "rc=$?"; grep -v -i "warn\|return cls" "$out/probe_budget.txt" | tail -n 11
echo "== memory_bench.py --quick"
OUT="$out" timeout 240 python3 benchmarks/memory_bench.py --quick >"$out/memory_stdout.log" 2>&1
echo "rc=$?"; grep "^|" "$out/memory.md" | cut -c1-200
