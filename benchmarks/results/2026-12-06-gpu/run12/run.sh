#!/usr/bin/env bash
# Run 12 (prepared in the third session of 2026-12-06, not run: no device time was left). Whether the connection
# ramp holds one 1 GiB object over HTTP below kvikio (0.79x in run 9): a store idle for a second comes back at a
# quarter of the limit it kept, and such a read is only 64 requests of 16 MiB, so its first rounds run with fewer
# than 16 in flight. The single-object benchmark with the core as committed ("cur") and the same core without the
# ramp ("noramp": ramp.rs START = 4096), alternating, 2 passes each; then the remote zarr rows once each.
# Cores: NAMES="cur noramp" bash benchmarks/results/2026-12-06-ramp/build_variants.sh in a worktree of the
# commit, gzipped into .gpu/core_<name>.so.gz; the tree carried as in run 9 (.gpu/tree.tar.gz from git archive).
#   source .gpu/prelude.sh; mkdir -p /tmp/tree && tar xzf .gpu/tree.tar.gz -C /tmp/tree && ln -sfn $PWD/.gpu /tmp/tree/.gpu &&
#   cd /tmp/tree && export PYTHONPATH=/tmp/tree:$PYTHONPATH PATH=$PWD/.gpu/bin:$PATH && OUT=$OUT bash benchmarks/results/2026-12-06-gpu/run12/run.sh
set -uo pipefail
out=${OUT:-run12-out}; mkdir -p "$out" /tmp/cores
export PYTHONPATH="$PWD/.gpu/py:${PYTHONPATH:-}" PATH="$PWD/.gpu/bin:$PATH"
for v in cur noramp; do gunzip -c .gpu/core_$v.so.gz > /tmp/cores/$v.so; done
for pass in 1 2; do for v in cur noramp; do
  cp /tmp/cores/$v.so gdsstore/_core.abi3.so
  echo "== one 1 GiB object, $v, pass $pass ($(date +%T))"
  timeout 90 python3 benchmarks/remote_bench.py --server nginx --repeat 5 --out "$out/single_${v}_$pass" \
    >"$out/single_${v}_$pass.log" 2>&1
  echo "rc=$?"; grep -E "^(gdsstore|kvikio RemoteFile, 16)" "$out/single_${v}_$pass.log" | cut -c1-100
done; done
OUT=$out TESTS=0 PASSES="cur noramp" bash benchmarks/results/2026-12-06-gpu/run5/run.sh
