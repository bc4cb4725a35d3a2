#!/usr/bin/env bash
# Call 6 of the H200 session of 2026-12-03: the archive benchmark's 64 KiB rows on the tree of call 5.
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200/run6/run.sh
set -uo pipefail
out=${OUT:-run6}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
export PATH="$PWD/.gpu/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== archives, 64k chunks"
timeout 240 python3 benchmarks/archive_bench.py --device --files 16 --steps 64 --chunk 64k --http --s3 \
  --nginx-workers 8 --rounds 3 --anchor-rounds 1 --skip "VirtualStore+zarr,VirtualStore+enable_pipeline" \
  --out "$out/archives_64k.json" >"$out/archives_64k.log" 2>&1
echo "rc=$?"; grep "^|" "$out/archives_64k.log" | cut -c1-200
