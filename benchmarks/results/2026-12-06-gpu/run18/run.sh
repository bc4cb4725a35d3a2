#!/usr/bin/env bash
# Run 18 of 2026-12-06 (fifth session): the remote zarr rows with the core of ef96c4b (the ramp as committed:
# back at the kept limit after an idle under 15 s), which no GPU run had read, on the H100 of run 17 while it
# was warm. Two device calls ran: run 14's script with PASSES=cur (remote_zarr_1_cur.*), then the single-object
# benchmark (single.log) and a second pass (remote_zarr_2_cur.*); this script runs the same in one go.
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH PATH=$PWD/.gpu/bin:$PATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run18/run.sh
set -uo pipefail
out=${OUT:-run18-out}; mkdir -p "$out"
here=benchmarks/results/2026-12-06-gpu
OUT=$out PASSES=cur bash $here/run14/run.sh
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
echo "== single ($(date +%T))"
timeout 100 python3 benchmarks/remote_bench.py --server nginx --repeat 5 --out "$out/single" >"$out/single.log" 2>&1
echo "rc=$?"; grep -E "^(gdsstore|kvikio)" "$out/single.log" | cut -c1-120
echo "== pass 2 ($(date +%T))"
timeout 150 python3 benchmarks/remote_zarr_bench.py --device --servers nginx-s3,nginx --nginx-workers 8 --rounds 2 \
  --no-single --out "$out/remote_zarr_2_cur.md" >"$out/remote_zarr_2_cur.log" 2>&1
echo "rc=$?"; grep "^| nginx" "$out/remote_zarr_2_cur.md" | sed -E 's/, [0-9.]+ CPU-s\/GB//g; s/\| [^|]*$//' | cut -c1-330
rm -rf "$out/single"
