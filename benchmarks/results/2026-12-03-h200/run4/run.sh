#!/usr/bin/env bash
# Call 4 of the H200 session of 2026-12-03: where a remote archive read's time goes (probe_archive_remote.py:
# 1 MiB chunks as one dataset over HTTP and S3, waves cut into 1 (as before), 64, 128 and 256 pieces).
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-03-h200/run4/run.sh
set -uo pipefail
out=${OUT:-run4}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}"
export PATH="$PWD/.gpu/bin:$PATH"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
python3 -m compileall -q gdsstore >/dev/null
echo "== probe_archive_remote.py --chunk 1m"
timeout 300 python3 benchmarks/probe_archive_remote.py --chunk 1m --rounds 5 >"$out/probe_archive_remote_1m.txt" 2>&1
echo "rc=$?"; grep -v -i "warn" "$out/probe_archive_remote_1m.txt" | tail -n 30
