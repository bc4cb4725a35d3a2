#!/usr/bin/env bash
# Call 1 of the fifth H200 session of 2026-12-02: the committed pool trim on a GPU (its GPU tests and the
# budget probe), and where a 1 GiB read's wall time goes window by window (probe_timeline.py), with the
# call's private CuPy pool and with CUDA's stream-ordered pool.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-02-h200-s5/run1/run.sh
set -uo pipefail
out=${OUT:-run1}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
echo "== GPU tests"
timeout 170 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline \
  tests/engine/test_stream_order.py tests/archives tests/adapters/test_zarr_store_gpu.py \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
for v in default async; do
  echo "== probe_timeline.py --variant $v"
  timeout 170 python3 benchmarks/probe_timeline.py --variant "$v" >"$out/probe_timeline_$v.txt" 2>&1
  echo "rc=$?"; grep -E "budget|mallocs|Error" "$out/probe_timeline_$v.txt" | cut -c1-140 | head -n 30
done
echo "== probe_budget.py (committed trim)"
timeout 60 python3 benchmarks/probe_budget.py >"$out/probe_budget.txt" 2>&1
echo "rc=$?"; grep -v -i "warn\|return cls" "$out/probe_budget.txt" | tail -n 11
