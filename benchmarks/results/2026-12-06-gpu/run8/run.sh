#!/usr/bin/env bash
# Run 8 of 2026-12-06 (run on 2026-12-06, third session, at 2ee47a4; cores built from it with
# NAMES="cur prev" bash benchmarks/results/2026-12-06-ramp/build_variants.sh, carried as .gpu/core_<v>.so.gz):
# (1) the GPU tests; (2) the ramp A/B after edcc3e5 (an idle store comes back at a quarter of the limit it
# kept): "cur" (the core as committed) and "prev" (the ramp of edcc3e5's parent: back from idle at 2), run5/run.sh
# passes of two rounds with every remote anchor carried; (3) the local table's zstd rows at a 1 GiB
# gpu.memory_budget as committed (after 19eafbd) and what bounds them (probe_budget_decode.py); (4) one 1 GiB
# object over nginx against kvikio's RemoteFile.
#   source .gpu/prelude.sh; OUT=$OUT TESTS=1 PASSES="cur prev" bash benchmarks/results/2026-12-06-gpu/run8/run.sh
set -uo pipefail
out=${OUT:-run8-out}; mkdir -p "$out"
here=benchmarks/results/2026-12-06-gpu
OUT=$out TESTS=${TESTS:-0} PASSES="${PASSES:-cur prev}" bash $here/run5/run.sh
echo "== table, budget 1 GiB ($(date +%T))"
GDSSTORE_GPU__MEMORY_BUDGET=1073741824 timeout 150 python3 benchmarks/zarr_bench.py --out "$out/table_1g" \
  --data /root/table-data --keep-data --only gdsstore --repeat 2 >"$out/table_1g.log" 2>&1
grep "zstd" "$out/table_1g.log" | cut -c17-100 | head -3
echo "== what bounds it ($(date +%T))"
timeout 90 python3 $here/run8/probe_budget_decode.py /root/table-data/c1024-s0-zstd.zarr 2>&1 | tail -n 30 | cut -c1-160
echo "== one 1 GiB object over nginx ($(date +%T))"
timeout 100 python3 benchmarks/remote_bench.py --server nginx --repeat 5 --out "$out" >"$out/remote_bench.log" 2>&1
echo "rc=$?"; tail -n 8 "$out/remote_bench.log" | cut -c1-120
rm -rf "$out"/table_1g/results.png
