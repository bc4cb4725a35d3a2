#!/usr/bin/env bash
# Run 8 of 2026-12-06 (second session): (1) the ramp A/B after edcc3e5 (an idle store comes back at a quarter
# of the limit it kept): "cur" (edcc3e5), "prev" (its parent's ramp: back from idle at 2), "noramp" (ramp.rs
# START = 4096), run5/run.sh passes of two rounds; (2) few large zstd chunks after 19eafbd (the split's model
# with a floor per device round): the large rows and the local table at a 1 GiB gpu.memory_budget, as committed.
# TESTS=1 runs the GPU tests first; LARGE=0 leaves the large rows out.
#   source .gpu/prelude.sh; OUT=$OUT TESTS=1 PASSES="cur prev" LARGE=0 bash benchmarks/results/2026-12-06-gpu/run8/run.sh
set -uo pipefail
out=${OUT:-run8-out}; mkdir -p "$out"
here=benchmarks/results/2026-12-06-gpu
OUT=$out TESTS=${TESTS:-0} PASSES="${PASSES:-cur prev noramp cur}" bash $here/run5/run.sh
[ "${LARGE:-1}" = 1 ] && echo "== large rows ($(date +%T))" && timeout 80 python3 benchmarks/zarr_bench.py --out "$out/large" --data /root/frontier-data --large --only gdsstore \
  --rounds 1 --repeat 2 --worker-timeout 60 >"$out/large.log" 2>&1
[ "${LARGE:-1}" = 1 ] && grep "zstd" "$out/large/large.md" | head -3 | cut -c1-80
echo "== table, budget 1 GiB ($(date +%T))"
GDSSTORE_GPU__MEMORY_BUDGET=1073741824 timeout 50 python3 benchmarks/zarr_bench.py --out "$out/table_1g" \
  --data /root/table-data --keep-data --only gdsstore --repeat 2 >"$out/table_1g.log" 2>&1
grep "zstd" "$out/table_1g.log" | cut -c17-100 | head -3
rm -rf "$out"/large/workers "$out"/table_1g/results.png
