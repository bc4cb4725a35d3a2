#!/usr/bin/env bash
# Run 7 of 2026-12-06 (second session), one call: (1) the GPU tests with the core at HEAD (the wave as columns,
# read_table); (2) the ramp A/B on the remote zarr rows, cores "cur" and "noramp" alternating (run5/run.sh, two
# rounds a pass); (3) the routing of few large zstd chunks after 2c1ae37 (nvCOMP alone where the split's model
# says so): the large rows as committed against nvCOMP alone (gpu.host_decode_chunks 0), alternating, and the
# local table at a 1 GiB gpu.memory_budget as committed, nvCOMP alone and the host alone, beside 4 GiB.
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run7/run.sh
set -uo pipefail
out=${OUT:-run7-out}; mkdir -p "$out"
here=benchmarks/results/2026-12-06-gpu
OUT=$out TESTS=1 PASSES="${PASSES:-cur noramp cur noramp}" bash $here/run5/run.sh
data=/root/frontier-data
for k in 1 2; do for v in default nvcomp; do
  env=(); [ $v = nvcomp ] && env=(GDSSTORE_GPU__HOST_DECODE_CHUNKS=0)
  echo "== large rows, $v, pass $k ($(date +%T))"
  env "${env[@]}" timeout 60 python3 benchmarks/zarr_bench.py --out "$out/large_${v}_$k" --data "$data" --large --only gdsstore \
    --rounds 1 --repeat 2 --worker-timeout 50 >"$out/large_${v}_$k.log" 2>&1
  grep "zstd" "$out/large_${v}_$k/large.md" | head -3 | cut -c1-80
done; done
declare -A set=([default]="" [nvcomp]="GDSSTORE_GPU__HOST_DECODE_CHUNKS=0"
  [host]="GDSSTORE_GPU__HOST_DECODE_CHUNKS=1000000 GDSSTORE_GPU__SPLIT_DECODE_BYTES=0")
for vb in default:4294967296 default:1073741824 nvcomp:1073741824 host:1073741824; do
  v=${vb%%:*} b=${vb##*:}
  echo "== table, $v, budget $b ($(date +%T))"
  env ${set[$v]} GDSSTORE_GPU__MEMORY_BUDGET=$b timeout 45 python3 benchmarks/zarr_bench.py --out "$out/table_${v}_$b" \
    --data /root/table-data --keep-data --only gdsstore --repeat 2 >"$out/table_${v}_$b.log" 2>&1
  grep "zstd" "$out/table_${v}_$b.log" | cut -c17-100
done
rm -rf "$out"/large_*/workers "$out"/table_*/results.png
