#!/usr/bin/env bash
# Call 5 of the H200 session of 2026-12-03: archives over HTTP and S3 without the HEAD per object after a
# read where the core's answers all carried the object's first-seen ETag (run 4: those checks took 36 ms of
# a 128 ms S3 read):
#   1. the archive GPU tests;
#   2. probe_archive_remote.py, 1 MiB chunks;
#   3. the archive benchmark's 1 MiB rows, every anchor in the run.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200/run5/run.sh
set -uo pipefail
out=${OUT:-run5}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
export PATH="$PWD/.gpu/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== archive GPU tests"
timeout 90 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests/archives >"$out/gpu_tests.txt" 2>&1
echo "rc=$?"; grep -E "^(FAILED|ERROR)|passed|failed" "$out/gpu_tests.txt" | cut -c1-300 | tail -n 12
echo "== probe_archive_remote.py --chunk 1m"
timeout 150 python3 benchmarks/probe_archive_remote.py --chunk 1m --rounds 5 --pieces 1,64 \
  >"$out/probe_archive_remote_1m.txt" 2>&1
echo "rc=$?"; grep -v -i "warn" "$out/probe_archive_remote_1m.txt" | tail -n 20
echo "== archives, 1m chunks"
timeout 200 python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --chunk 1m --http --s3 \
  --nginx-workers 8 --rounds 3 --anchor-rounds 1 --skip "VirtualStore+zarr,VirtualStore+enable_pipeline" \
  --out "$out/archives_1m.json" >"$out/archives_1m.log" 2>&1
echo "rc=$?"; grep "^|" "$out/archives_1m.log" | cut -c1-200
