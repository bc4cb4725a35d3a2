#!/usr/bin/env bash
# Run 4 of 2026-12-06, on run 3's machine and data: (a) the decode split of few large zstd chunks A/B
# (gpu.split_decode_bytes 4 MiB, the default, against 0: such reads on the host alone, in the folders named
# "nvcomp"), gdsstore alone, the large rows,
# alternating; (b) the local zarr table (1 GiB float32 16384²) with kvikio, zarr enable_gpu and tensorstore,
# after the landing layer moved the local GPU reads.
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run4/run.sh
set -uo pipefail
out=${OUT:-run4-out}; mkdir -p "$out"
export PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
data=${DATA:-/root/frontier-data}
for k in 1 2; do for v in split nvcomp; do
  env=(); [ $v = nvcomp ] && env=(GDSSTORE_GPU__SPLIT_DECODE_BYTES=0)
  echo "== large rows, $v, pass $k"
  env "${env[@]}" timeout 100 python3 benchmarks/zarr_bench.py --out "$out/large_${v}_$k" --data "$data" --large --only gdsstore \
    --rounds 1 --repeat 2 --worker-timeout 90 >"$out/large_${v}_$k.log" 2>&1
  grep "^| " "$out/large_${v}_$k/large.md" | cut -c1-200
done; done
echo "== local zarr table"
timeout 280 python3 benchmarks/zarr_bench.py --out "$out/table" --only gdsstore,kvikio,zarr,tensorstore --repeat 2 \
  >"$out/table.log" 2>&1
echo "rc=$?"; grep "^| " "$out/table/"*.md 2>/dev/null | head -12 || tail -5 "$out/table.log"
