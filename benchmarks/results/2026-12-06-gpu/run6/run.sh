#!/usr/bin/env bash
# Run 6 of 2026-12-06 (second session), issue 37 part 2: which decoder should take the zstd chunks of a
# device read, measured with settings only (the core at HEAD, gdsstore alone, then zarr enable_gpu and zarrs
# as anchors, all in this one call):
#   default   as committed: the split of few large chunks (fewer than gpu.host_decode_chunks per nvCOMP call:
#             the 64 and 128 MiB rows; the 16 MiB row is nvCOMP alone)
#   split     every read of chunks >= gpu.split_decode_bytes split (gpu.host_decode_chunks 1000000)
#   nvcomp    nvCOMP alone (gpu.host_decode_chunks 0)
#   host      the host's threads alone (gpu.host_decode_chunks 1000000, gpu.split_decode_bytes 0)
# on the large rows (64 x 16, 16 x 64, 8 x 128 MiB) and the local table (4 MiB chunks among them), the table
# also at a 1 GiB gpu.memory_budget.
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run6/run.sh
set -uo pipefail
out=${OUT:-run6-out}; mkdir -p "$out" /tmp/cores
export PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
[ -e gdsstore/_core.abi3.so ] || gunzip -c .gpu/core_cur.so.gz > gdsstore/_core.abi3.so
data=${DATA:-/root/frontier-data}
declare -A set=(
  [default]=""
  [split]="GDSSTORE_GPU__HOST_DECODE_CHUNKS=1000000"
  [nvcomp]="GDSSTORE_GPU__HOST_DECODE_CHUNKS=0"
  [host]="GDSSTORE_GPU__HOST_DECODE_CHUNKS=1000000 GDSSTORE_GPU__SPLIT_DECODE_BYTES=0"
)
for v in ${VARIANTS:-split nvcomp host}; do
  echo "== large rows, $v ($(date +%T))"
  env ${set[$v]} timeout 80 python3 benchmarks/zarr_bench.py --out "$out/large_$v" --data "$data" --large --only gdsstore \
    --rounds 1 --repeat 2 --worker-timeout 70 >"$out/large_$v.log" 2>&1
  grep "zstd" "$out/large_$v/large.md" | cut -c1-120
done
echo "== large rows, anchors ($(date +%T))"
timeout 110 python3 benchmarks/zarr_bench.py --out "$out/large_anchors" --data "$data" --large --only zarr,zarrs \
  --rounds 1 --repeat 2 --worker-timeout 60 >"$out/large_anchors.log" 2>&1
grep "zstd" "$out/large_anchors/large.md" | cut -c1-160
for vb in ${TABLE:-default:4294967296 split:4294967296 default:1073741824}; do
  v=${vb%%:*} b=${vb##*:}
  echo "== table, $v, budget $b ($(date +%T))"
  env ${set[$v]} GDSSTORE_GPU__MEMORY_BUDGET=$b timeout 45 python3 benchmarks/zarr_bench.py --out "$out/table_${v}_$b" \
    --data /root/table-data --keep-data --only gdsstore --repeat 2 >"$out/table_${v}_$b.log" 2>&1
  grep "gdsstore " "$out/table_${v}_$b.log" | cut -c1-100
done
