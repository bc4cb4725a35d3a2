#!/usr/bin/env bash
# Run 5 of 2026-12-06 (second session): the GPU tests against the core at HEAD (c87d0e5: the stale-connection
# kind, put.rs Uploads, selection.rs slice_table, the landing layer's multi-buffer Landed, nvcomp DecodeTable,
# host placement), then the ramp A/B on the remote zarr rows: "cur" (the ramp as committed), "noramp" (the same
# core, ramp.rs START = 4096: no ramp), "old" (5375749's ramp), built by
# benchmarks/results/2026-12-06-ramp/build_variants.sh and carried gzipped as .gpu/core_<name>.so.gz.
# PASSES (default "cur noramp cur") names the order; each pass is a full remote_zarr_bench of 2 rounds.
#   source .gpu/prelude.sh; OUT=$OUT TESTS=1 PASSES="cur noramp cur" bash benchmarks/results/2026-12-06-gpu/run5/run.sh
set -uo pipefail
out=${OUT:-run5-out}; mkdir -p "$out" /tmp/cores
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:/tmp/site/bin:$PATH"
for v in cur noramp prev; do [ -e .gpu/core_$v.so.gz ] || continue; [ -e /tmp/cores/$v.so ] || gunzip -c .gpu/core_$v.so.gz > /tmp/cores/$v.so; done
cp /tmp/cores/cur.so gdsstore/_core.abi3.so
python3 -c 'import gdsstore._core, gdsstore; print("gdsstore", gdsstore.__file__)'
if [ "${TESTS:-1}" = 1 ]; then
  echo "== GPU tests"
  timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/gpu_pipeline tests/remote/test_gpu_remote.py \
    tests/engine tests/adapters/test_zarr_store_gpu.py >"$out/gpu_tests.txt" 2>&1
  echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed|Error" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 15
fi
k=0
for v in ${PASSES:-cur noramp cur}; do
  k=$((k + 1))
  cp /tmp/cores/$v.so gdsstore/_core.abi3.so
  echo "== pass $k: $v ($(date +%T))"
  timeout 125 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 2 \
    --no-single --out "$out/remote_zarr_${k}_$v.md" >"$out/remote_zarr_${k}_$v.log" 2>&1
  echo "rc=$?"; grep "^| nginx" "$out/remote_zarr_${k}_$v.md" | sed -E 's/, [0-9.]+ CPU-s\/GB//g; s/\| [^|]*$//' | cut -c1-230
done
cp /tmp/cores/cur.so gdsstore/_core.abi3.so
