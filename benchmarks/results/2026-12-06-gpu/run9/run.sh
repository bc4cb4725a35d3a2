#!/usr/bin/env bash
# Run 9 of 2026-12-06 (third session), the call after run 8 on the same machine where it stays warm: the local
# table with every contender (kvikio, zarr enable_gpu, tensorstore, czarr through configure_gpu and its core API,
# gdsstore), then issue 37's large-chunk rows with every anchor. The tree is the committed one (carried as
# .gpu/tree.tar.gz from `git archive`), its core .gpu/core_cur.so.gz built from the same commit.
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run9/run.sh
set -uo pipefail
out=${OUT:-run9-out}; mkdir -p "$out"
export PYTHONPATH="$PWD/.gpu/py:${PYTHONPATH:-}"
gunzip -c .gpu/core_cur.so.gz > gdsstore/_core.abi3.so
python3 -c 'import czarr, kvikio, zarrs, tensorstore; print("anchors importable")' 2>&1 | tail -1
echo "== the table, every contender ($(date +%T))"
timeout 270 python3 benchmarks/zarr_bench.py --out "$out/table" --data /root/table-data --keep-data --repeat 3 \
  >"$out/table.log" 2>&1
echo "rc=$?"; grep "^|" "$out/table/results.md" | cut -c1-220
echo "== large rows, every anchor ($(date +%T))"
timeout 290 python3 benchmarks/zarr_bench.py --out "$out/large" --data /root/frontier-data --large --rounds 1 --repeat 2 \
  --worker-timeout 60 --time-limit 240 >"$out/large.log" 2>&1
echo "rc=$?"; grep "^|" "$out/large/large.md" | cut -c1-260
rm -rf "$out"/large/workers "$out"/table/results.png
