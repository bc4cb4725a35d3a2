#!/usr/bin/env bash
# Run 23: where an S3 64 KiB zarr read's wall goes on the GPU machine (benchmarks/profile_s3_zarr.py --device:
# open_array, zarr's own share of a[:], gdsstore's call, the trace, a cProfile of the calling thread); one 1 GiB
# object with 32 connections (kvikio beside it); the docs' GPU code blocks alone (pytest -m gpu tests/docs), which
# overran the whole suite's cap in run 19's lease.
# From the project root on the GPU machine (carry .whl, .gpu):
#   source .gpu/prelude.sh; OUT=$OUT bash benchmarks/results/2026-12-07-gpu/run23/run.sh
set -uo pipefail
out=${OUT:-run23-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
gunzip -c .gpu/core_parts.so.gz > gdsstore/_core.abi3.so
echo "== profile S3 64 KiB ($(date +%T))"
timeout 150 python3 benchmarks/profile_s3_zarr.py --chunk 128 --device --nginx-workers 8 --rounds 7 \
  --out "$out/profile_s3_64k.txt" >"$out/profile_s3_64k.log" 2>&1
echo "rc=$?"; head -n 16 "$out/profile_s3_64k.txt" | cut -c1-400
echo "== single, 32 connections ($(date +%T))"  # one 1 GiB object: does gdsstore gain from more connections?
GDSSTORE_REMOTE__CONCURRENCY=32 GDSSTORE_PINNED_MEMORY_LIMIT=2147483648 timeout 100 python3 benchmarks/remote_bench.py \
  --server nginx --repeat 5 --out "$out/single32" >"$out/single32.log" 2>&1
echo "rc=$?"; grep -E "^(gdsstore|kvikio)" "$out/single32.log" | cut -c1-120; rm -rf "$out/single32"
[ "${DOCS_SECONDS:-300}" != 0 ] || exit 0  # 0: no docs blocks (the device time left was short)
echo "== docs GPU blocks ($(date +%T))"
timeout ${DOCS_SECONDS:-300} python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/docs \
  >"$out/gpu_docs.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_docs.txt" | cut -c1-300 | tail -n 12
echo "== done ($(date +%T))"
