#!/usr/bin/env bash
# Call 6 of the fifth H200 session of 2026-12-02: would two windows decoding at once, each on its own
# stream, beat one window? (probe_overlap.py, three variants in turn, bytes checked.)
#   source .gpu/prelude.sh; bash benchmarks/results/2026-12-02-h200-s5/run6/run.sh
set -uo pipefail
out=${OUT:-run6}
mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:${PYTHONPATH:-}"
unset PYTHONDONTWRITEBYTECODE
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
for round in 1 2; do
  for v in default halves overlap; do
    timeout 90 python3 benchmarks/probe_overlap.py --variant $v 2>&1 | grep -v -i "warn\|return cls\|^data" \
      | tee -a "$out/probe_overlap.txt"
  done
done
