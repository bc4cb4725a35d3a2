#!/usr/bin/env bash
# The large-chunk rows of issue 37 (1 GiB float32 in 64 x 16 MiB, 16 x 64 MiB and 8 x 128 MiB chunks,
# uncompressed and zstd level 1) with every anchor in the same run, in one GPU-machine call of <= 9 minutes:
#   source .gpu/prelude.sh; bash benchmarks/gpu_frontier.sh
# It installs nothing: the prelude puts the carried wheels (.whl/) on PYTHONPATH. Carry, for every anchor:
#   bash ../shared/gpu/fetch-wheels.sh base nvcomp anchors czarr path/to/the/core.whl
#   rm -f .whl/obstore-* .whl/pytest_asyncio-*   # not needed here; without them the wheels fit 64 MiB
# An anchor whose wheels are missing is skipped with its reason (anchors.txt, and the notes of large.md).
# Results in $OUT (default frontier-out): anchors.txt (versions, what can run), large.md / large.json,
# large.log, workers/*.log (each worker's output). Data in $DATA (default /root/frontier-data, on the
# root disk: cuFile cannot read tmpfs), kept for a later call on the same machine.
set -uo pipefail
out=${OUT:-frontier-out}
data=${DATA:-/root/frontier-data}
rounds=${ROUNDS:-3}
repeat=${REPEAT:-2}
size=${SIZE:-16384}   # a smaller edge (a multiple of 8) tries the script out anywhere
mkdir -p "$out"

# step NAME SECONDS CMD...: runs CMD under timeout and says how it ended; never stops the script.
step() {
  local name=$1 secs=$2
  shift 2
  echo "== $name ($(date +%T), at most ${secs} s)"
  timeout -k 10 "$secs" "$@"
  local rc=$?
  case $rc in
    0) ;;
    124 | 137) echo "== $name: timed out after ${secs} s" ;;
    *) echo "== $name: failed, exit status $rc" ;;
  esac
  return 0
}

step "anchors" 60 python3 benchmarks/zarr_bench.py --out "$out" --size "$size" --list >"$out/anchors.txt" 2>&1
cat "$out/anchors.txt"
# 360 s: the last worker starts by then and ends within its 100 s: the step ends before its 480 s.
step "large-chunk rows" 480 python3 benchmarks/zarr_bench.py --out "$out" --data "$data" --size "$size" --large \
  --rounds "$rounds" --repeat "$repeat" --time-limit 360 --worker-timeout 100 >"$out/large.log" 2>&1
if [ -s "$out/large.md" ]; then
  # the compact table (up to the first blank line), then the notes: skips and failures with their reasons
  awk 'NF == 0 { exit } { print }' "$out/large.md"
  grep "^- " "$out/large.md"
else
  echo "no large.md: the run ended early; its last lines:"
  tail -n 25 "$out/large.log"
fi
