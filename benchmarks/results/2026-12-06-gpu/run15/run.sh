#!/usr/bin/env bash
# Run 15 of 2026-12-06 (fourth session): (1) where gdsstore's remote zarr reads spend their time, back to back and
# after 1.5 s idle (probe_remote_phases.py, the core as committed); (2) one 1 GiB object over nginx with
# remote_bench --sweep (slot and range sizes, 32 in flight, host memory) against kvikio, twice; (3) the rest of
# run 14's ramp A/B: passes PASSES (default "noramp cur"). kvikio's wheels back in .whl, obstore's kept.
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH PATH=$PWD/.gpu/bin:$PATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run15/run.sh
set -uo pipefail
out=${OUT:-run15-out}; mkdir -p "$out" /tmp/cores
export PYTHONPATH="$PWD/.gpu/py:$PWD/tests:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
[ -e /tmp/cores/cur.so ] || gunzip -c .gpu/core_cur.so.gz > /tmp/cores/cur.so
cp /tmp/cores/cur.so gdsstore/_core.abi3.so
echo "== phases ($(date +%T))"
timeout 120 python3 benchmarks/results/2026-12-06-gpu/run15/probe_remote_phases.py 2>&1 | tee "$out/phases.txt" | cut -c1-200
for pass in 1 2; do
  echo "== one 1 GiB object, sweep, pass $pass ($(date +%T))"
  timeout 80 python3 benchmarks/remote_bench.py --server nginx --repeat 5 --sweep --out "$out/single_$pass" >"$out/single_$pass.log" 2>&1
  echo "rc=$?"; grep -E "^(gdsstore|kvikio RemoteFile, 16)" "$out/single_$pass.log" | cut -c1-100
done
OUT=$out PASSES="${PASSES:-noramp cur}" bash benchmarks/results/2026-12-06-gpu/run14/run.sh
