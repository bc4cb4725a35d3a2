#!/usr/bin/env bash
# Run 11 of 2026-12-06 (third session): after 5bd393e (windows of uncompressed chunks set no nvCOMP scratch aside),
# the large-chunk rows and the local table again, every contender, fresh processes (as run 9).
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run11/run.sh
set -uo pipefail
out=${OUT:-run11-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:${PYTHONPATH:-}"
gunzip -c .gpu/core_cur.so.gz > gdsstore/_core.abi3.so
echo "== large rows, every anchor ($(date +%T))"
timeout 250 python3 benchmarks/zarr_bench.py --out "$out/large" --data /root/frontier-data --large --rounds 1 --repeat 3 \
  --worker-timeout 60 --time-limit 200 >"$out/large.log" 2>&1
echo "rc=$?"; grep "^| [0-9]* chunks" "$out/large/large.md" | head -6 | cut -c1-260
echo "== the table, every contender ($(date +%T))"
timeout 250 python3 benchmarks/zarr_bench.py --out "$out/table" --data /root/table-data --keep-data --repeat 3 \
  >"$out/table.log" 2>&1
echo "rc=$?"; grep "^|" "$out/table/results.md" | cut -c1-220
rm -rf "$out"/large/workers "$out"/table/results.png
