#!/usr/bin/env bash
# Call 2 of the H200 session of 2026-12-03: the CPU route with zstd decoded straight into the pinned slot and
# its windows sized to the budget, and gpu.host_decode_chunks (64) deciding the route:
#   1. the GPU tests (the pipeline's; the archive tests need wheels not carried in this call);
#   2. probe_small_reads.py (both routes forced);
#   3. the budget sweep with every read on the CPU (gpu.host_decode_bytes 2^40);
#   4. memory_bench.py --quick at the defaults: the Performance page's memory tables.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200/run2/run.sh
set -uo pipefail
out=${OUT:-run2}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== GPU tests"
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline \
  tests/engine/test_stream_order.py tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== probe_small_reads.py"
timeout 100 python3 benchmarks/probe_small_reads.py --reads 5 >"$out/probe_small_reads.txt" 2>&1
echo "rc=$?"; grep -v -i "warn\|return cls" "$out/probe_small_reads.txt" | tail -n 9
echo "== budget sweep, every read on the cpu"
OUT="$out/sweep_cpu" timeout 100 python3 benchmarks/memory_bench.py --quick --parts sweep \
  --settings '{"gpu.host_decode_bytes": 1099511627776}' >"$out/sweep_cpu.log" 2>&1
echo "rc=$?"; grep "^|" "$out/sweep_cpu/memory.md" | cut -c1-200
echo "== memory_bench.py --quick"
OUT="$out/memory" timeout 280 python3 benchmarks/memory_bench.py --quick >"$out/memory_stdout.log" 2>&1
echo "rc=$?"; grep "^|" "$out/memory/memory.md" | cut -c1-200
