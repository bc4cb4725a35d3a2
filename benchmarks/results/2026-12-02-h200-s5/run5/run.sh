#!/usr/bin/env bash
# Call 5 of the fifth H200 session of 2026-12-02: small reads decoded on the CPU (gpu.host_decode_bytes,
# 16 MiB by default): the GPU tests (docs' GPU blocks among them), the two routes side by side on warm
# reads of 1-64 MiB (probe_small_reads.py), and the memory benchmark on the finished tree, with the
# package's bytecode compiled as an installed package has it.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-02-h200-s5/run5/run.sh
set -uo pipefail
out=${OUT:-run5}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== GPU tests"
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline \
  tests/engine/test_stream_order.py tests/archives tests/adapters/test_zarr_store_gpu.py tests/docs \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== probe_small_reads.py"
timeout 120 python3 benchmarks/probe_small_reads.py >"$out/probe_small_reads.txt" 2>&1
echo "rc=$?"; grep -v -i "warn\|return cls" "$out/probe_small_reads.txt" | tail -n 9
echo "== memory_bench.py --quick"
OUT="$out" timeout 240 python3 benchmarks/memory_bench.py --quick >"$out/memory_stdout.log" 2>&1
echo "rc=$?"; grep "^|" "$out/memory.md" | cut -c1-200
