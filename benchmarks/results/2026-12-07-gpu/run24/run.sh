#!/usr/bin/env bash
# Run 24: what runs 22 and 23 left out for lack of device time: one pass of the remote zarr rows (four interleaved
# rounds, every anchor but s3fs), one 1 GiB object against kvikio (whose wheels runs 22-23 lacked) and the docs'
# GPU code blocks alone (pytest -m gpu tests/docs); first the scatter's GPU tests (10ba323's fill encoding);
# between, S3 shards before and after b56d341 (a few shards' reads as many requests).
# From the project root on the GPU machine (carry .whl with kvikio-cu13, libkvikio-cu13, rapids-logger, and .gpu):
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-07-gpu/run24/run.sh
set -uo pipefail
out=${OUT:-run24-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_parts.so.gz > gdsstore/_core.abi3.so
echo "== scatter GPU tests ($(date +%T))"  # 10ba323 (one fill encoding for both kernels) had not run on a GPU
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" tests/gpu_pipeline -k "scatter or fill or parts" >"$out/gpu_scatter_tests.txt" 2>&1
echo "rc=$?"; tail -n 3 "$out/gpu_scatter_tests.txt"
if [ "${BENCH_SECONDS:-240}" != 0 ]; then  # 0: no pass of the remote rows (the device time left was short)
  echo "== bench ($(date +%T))"
  timeout ${BENCH_SECONDS:-240} python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 \
    --rounds ${ROUNDS:-4} --no-single --out "$out/remote_zarr.md" >"$out/remote_zarr.log" 2>&1
  echo "rc=$?"; t="$out/remote_zarr.md"; [ -s "$t" ] || t="$out/remote_zarr.log"
  grep "^| nginx" "$t" | sed -E 's/, [0-9.]+ CPU-s\/GB//g; s/\| [^|]*$//' | cut -c1-400
fi
echo "== S3 shards, before and after b56d341 ($(date +%T))"  # run 21: S3 shards 4.26 GB/s, 4 MiB chunks 7.65
# before: 16 reads of 16 MiB (zarr's coalescing, one per shard); after: 64 of 4 MiB (request_size). The code
# before it is .gpu/old (git archive 5f4a91d gdsstore), first on PYTHONPATH; three alternations, fresh processes.
cp gdsstore/_core.abi3.so .gpu/old/gdsstore/
for v in old new old new old new; do
  pp=$PYTHONPATH; [ $v = old ] && pp="$PWD/.gpu/old:$PYTHONPATH"
  echo "-- $v" >>"$out/shards_probe.txt"
  PYTHONPATH=$pp timeout 60 python3 benchmarks/profile_s3_zarr.py --device --chunk 256 --shard 2048 --nginx-workers 8 \
    --rounds 5 --no-profile >>"$out/shards_probe.txt" 2>&1
  echo "rc=$? $v"; tail -n 9 "$out/shards_probe.txt" | grep -E "GB/s, |^read" | cut -c1-200
done
echo "== single ($(date +%T))"
# --sweep: gdsstore under other range and slot sizes and into host memory; a pinned account of 4 GiB holds every
# contender's ring at once (at 1 GiB they freed and pinned each other's slots every round: docs/performance.md)
GDSSTORE_PINNED_MEMORY_LIMIT=4294967296 timeout ${SINGLE_SECONDS:-120} python3 benchmarks/remote_bench.py --server nginx --repeat ${REPEAT:-5} --sweep \
  --out "$out/single" >"$out/single.log" 2>&1
echo "rc=$?"; grep -E "^(gdsstore|kvikio)" "$out/single.log" | cut -c1-120; rm -rf "$out/single"
[ "${DOCS_SECONDS:-200}" != 0 ] || exit 0  # 0: no docs blocks (the device time left was short)
echo "== docs GPU blocks ($(date +%T))"
timeout ${DOCS_SECONDS:-200} python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/docs \
  >"$out/gpu_docs.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_docs.txt" | cut -c1-300 | tail -n 12
echo "== done ($(date +%T))"
