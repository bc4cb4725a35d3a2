#!/usr/bin/env bash
# Call 3 of the H200 session of 2026-12-03: archives over HTTP and S3 with each wave's reads cut into pieces
# (gdsstore.archives.fetch.pieces: a window was one request per file, 8 in flight):
#   1. the archive GPU tests (VirtualiZarr, kerchunk, h5py, netCDF4 carried this time);
#   2. the archive benchmark, 1 MiB chunks then 64 KiB chunks, every anchor in the run.
# Carried: .whl (+ virtualizarr, kerchunk, obspec, obspec-utils, h5py, netCDF4, cftime, ujson), .gpu (nginx,
# botocore trimmed to its s3/sts/sso data in .gpu/py).
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200/run3/run.sh
set -uo pipefail
out=${OUT:-run3}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
export PATH="$PWD/.gpu/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== archive GPU tests"
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/archives >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
for c in 1m:170 64k:200; do
  ch=${c%%:*}
  echo "== archives, $ch chunks"
  timeout "${c##*:}" python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --chunk "$ch" --http --s3 \
    --nginx-workers 8 --rounds 3 --anchor-rounds 1 --skip "VirtualStore+zarr,VirtualStore+enable_pipeline" \
    --out "$out/archives_$ch.json" >"$out/archives_$ch.log" 2>&1
  echo "rc=$?"; grep "^|" "$out/archives_$ch.log" | cut -c1-200
done
