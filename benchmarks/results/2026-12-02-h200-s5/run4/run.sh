#!/usr/bin/env bash
# Call 4 of the fifth H200 session of 2026-12-02: where the first GPU read of a 16 MiB array goes
# (probe_first_read.py), with and without bytecode caching (an installed package has its .pyc files;
# PYTHONDONTWRITEBYTECODE=1 makes every process compile the package's sources), and the exact-scratch
# test after its calls were limited to 64 MiB and more.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-02-h200-s5/run4/run.sh
set -uo pipefail
out=${OUT:-run4}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-unset} on arrival"
export PYTHONDONTWRITEBYTECODE=1  # the fresh copy has no __pycache__: the "compile" rows first
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests/gpu_pipeline/test_nvcomp_capi.py \
  >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 5
for mode in compile cached; do
  if [ $mode = cached ]; then unset PYTHONDONTWRITEBYTECODE; python3 -m compileall -q gdsstore >/dev/null; fi
  echo "== $mode"
  timeout 100 python3 benchmarks/probe_first_read.py >"$out/probe_first_read_$mode.txt" 2>&1
  echo "rc=$?"; grep -E "^first read|imports during" "$out/probe_first_read_$mode.txt"
  OUT="$out/first_read_$mode" timeout 100 python3 benchmarks/memory_bench.py --quick --parts first_read >/dev/null 2>&1
  echo "rc=$?"; grep "^|" "$out/first_read_$mode/memory.md"
done
