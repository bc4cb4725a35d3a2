#!/usr/bin/env bash
# Run 2 of 2026-12-06: the connection ramp A/B on the remote zarr rows (run 1 measured them below the week's
# ratios). "ramp": the core as committed (a store's requests in flight start at 2 and grow while the answer
# rate rises); "no ramp": the same core with the ramp starting at remote.wave_concurrency (native/src/ramp.rs
# START = 4096, the one change). Alternating A B A B, each a full remote_zarr_bench of 2 rounds; anchors:
# tensorstore and fsspec (zarrs and obstore left out to fit the carry).
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run2/run.sh
set -uo pipefail
out=${OUT:-run2-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
for k in 1 2; do for v in ramp noramp; do
  cp ".gpu/core_$v.so" gdsstore/_core.abi3.so
  echo "== $v, pass $k"
  timeout 125 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 2 \
    --no-single --out "$out/remote_zarr_${v}_$k.md" >"$out/remote_zarr_${v}_$k.log" 2>&1
  echo "rc=$?"; grep "^| nginx" "$out/remote_zarr_${v}_$k.md" | sed -E 's/; zarr FsspecStore[^|]*//' | cut -c1-160
done; done
cp .gpu/core_ramp.so gdsstore/_core.abi3.so
