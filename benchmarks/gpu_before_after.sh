#!/usr/bin/env bash
# One GPU-machine run: the GPU tests, then the local zarr table, the raw-file read and the single 1 GiB
# remote object, each for this tree ("after") and for an older gdsstore ("before", a copy of its package
# and benchmarks in $BEFORE), interleaved on the same machine instance, so the ratios compare like with like.
#   git archive <commit> gdsstore benchmarks | tar -x -C .gpu/before      # on the dev machine
#   source .gpu/prelude.sh; BEFORE=.gpu/before bash benchmarks/gpu_before_after.sh   # on the GPU machine
set -uo pipefail
out=${OUT:-bench-results}; mkdir -p "$out"
data=${DATA:-/root/zb}
before=${BEFORE:-.gpu/before}
log="$out/run.log"
export PYTHONPATH="$PWD/tests:$PYTHONPATH"
[ -x .gpu/bin/nginx ] && export PATH="$PWD/.gpu/bin:$PATH" LD_LIBRARY_PATH="$PWD/.gpu/lib:${LD_LIBRARY_PATH:-}"
old() { PYTHONPATH="$PWD/$before:$PWD/tests:/tmp/site" "$@"; }
if [ "${TABLE:-1}" = 1 ]; then  # TABLE=0: only the before/after rows below (the table came from an earlier call)
  timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" -rs tests 2>&1 | tee "$out/gpu-tests.txt" | tail -4
  # zarr table: every contender (after), then gdsstore alone for before and after again (same data, warm cache)
  timeout 330 python3 benchmarks/zarr_bench.py --out "$out/zarr" --data "$data" --repeat 3 >> "$log" 2>&1
  grep "^|" "$out/zarr/results.md"
fi
for side in before after; do
  if [ $side = before ]; then run=old; bench="$before/benchmarks/zarr_bench.py"; else run=; bench=benchmarks/zarr_bench.py; fi
  $run timeout 150 python3 "$bench" --out "/tmp/zb-$side" --data "$data" --repeat 3 --only gdsstore >> "$log" 2>&1
  echo "zarr gdsstore $side:"; grep "^| " "/tmp/zb-$side/results.md" | cut -d'|' -f2,6
done
f="$data/raw.bin"
for side in before after before after; do
  if [ $side = before ]; then run=old; else run=; fi
  echo "raw $side: $($run timeout 100 python3 -m gdsstore.cli bench $f --threads 16 --repeat 5 2>/dev/null | grep -i 'gdsstore (defaults)')"
done
for side in before after; do
  if [ $side = before ]; then run=old; bench="$before/benchmarks/remote_bench.py"; else run=; bench=benchmarks/remote_bench.py; fi
  echo "remote $side:"; $run timeout 150 python3 "$bench" --size 1GiB --repeat 5 --out "/tmp/rb-$side" 2>&1 | tail -7 | tee -a "$log"
done
cp /tmp/rb-after/remote_bench.json "$out/remote_bench.json" 2>/dev/null
